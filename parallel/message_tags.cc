// Range checks of the message tag allocation.
#include "parallel/message_tags.h"

#include <string>

namespace loom {

Status CheckPipelineTags(int64_t micro, int64_t chunks) {
  // The largest index is that of the last gradient: (micro * chunks - 1) * 2 + 1.
  if (micro * chunks * 2 > kPipelineTransferTags.count || chunks > kPipelineEvalTags.count) {
    return FailedPrecondition(
        std::to_string(micro) + " micro-batches over " + std::to_string(chunks) +
        " pipeline chunks need more message tags than the " + kPipelineTransferTags.user +
        " own (at most " + std::to_string(kPipelineTransferTags.count / 2) +
        " micro-batches x chunks)");
  }
  return Status::Ok();
}

Status CheckRingTags(int64_t cp) {
  if (cp > kRingForwardTags.count) {
    return FailedPrecondition("ring attention over " + std::to_string(cp) +
                              " context ranks needs more message tags than it owns (at most " +
                              std::to_string(kRingForwardTags.count) + " ranks)");
  }
  return Status::Ok();
}

}  // namespace loom
