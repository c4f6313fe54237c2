// This rank's communicators of a layout, created in one fixed order.
#include "parallel/process_groups.h"

#include <string>

namespace loom {

Result<ProcessGroups> ProcessGroups::Create(Backend& backend, const Layout& layout) {
  if (layout.world() != backend.world_size()) {
    return InvalidArgument("layout " + layout.ToString() + " covers " +
                           std::to_string(layout.world()) + " ranks, not the " +
                           BackendKindName(backend.kind()) + " backend's world of " +
                           std::to_string(backend.world_size()));
  }
  ProcessGroups g;
  g.layout = layout;
  g.world_rank = backend.world_rank();
  LOOM_ASSIGN_OR_RETURN(g.world, backend.World());
  // Every rank creates its groups in the same order (group creation is collective).
  auto join = [&](GroupKind kind, bool needed, CommPtr* slot) -> Status {
    if (!needed) return Status::Ok();
    LOOM_ASSIGN_OR_RETURN(
        *slot, backend.CreateGroup(GroupKindName(kind), layout.GroupOf(kind, g.world_rank)));
    return Status::Ok();
  };
  LOOM_RETURN_IF_ERROR(join(GroupKind::kTensor, layout.tp > 1, &g.tp));
  LOOM_RETURN_IF_ERROR(join(GroupKind::kContext, layout.cp > 1, &g.cp));
  LOOM_RETURN_IF_ERROR(join(GroupKind::kDataContext, layout.cp > 1, &g.dpcp));
  LOOM_RETURN_IF_ERROR(join(GroupKind::kPipeline, layout.pp > 1, &g.pp));
  LOOM_RETURN_IF_ERROR(join(GroupKind::kData, layout.dp > 1, &g.dp));
  return g;
}

}  // namespace loom
