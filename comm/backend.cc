// The backend base (world, groups, trace) and the factory.
#include "comm/backend.h"

#include <algorithm>
#include <set>

#include "comm/call.h"
#include "comm/local/local_backend.h"
#include "comm/mpi/mpi_backend.h"
#ifdef LOOM_HAVE_NCCL
#include "comm/nccl/nccl_backend.h"
#endif
#include "core/tunables.h"

namespace loom {

const IntTunable kCommTimeoutTunable =
    RegisterTunable({"LOOM_COMM_TIMEOUT_MS", 30000, 1, kMaxTunableMs, "a number of ms"});

const char* BackendKindName(BackendKind kind) {
  switch (kind) {
    case BackendKind::kMpi:
      return "mpi";
    case BackendKind::kLocal:
      return "local";
    case BackendKind::kNccl:
      return "nccl";
  }
  return "?";
}

Backend::Backend(int world_rank, int world_size, std::chrono::milliseconds timeout)
    : world_rank_(world_rank),
      world_size_(world_size),
      ctx_(std::make_shared<RankContext>(world_rank, timeout)) {}

Backend::~Backend() = default;

bool Backend::Abandoned() const {
  return ctx_->Abandoned();
}

void Backend::Cancel(const std::string& why) {
  ctx_->Cancel(why);
}
CallTrace& Backend::trace() {
  return ctx_->trace();
}
std::chrono::milliseconds Backend::default_timeout() const {
  return ctx_->default_timeout();
}

Result<std::shared_ptr<Communicator>> Backend::World() {
  std::vector<int> members(static_cast<size_t>(world_size_));
  for (int i = 0; i < world_size_; ++i) members[static_cast<size_t>(i)] = i;
  return Make("world", std::move(members), /*world=*/true);
}

Result<std::shared_ptr<Communicator>> Backend::CreateGroup(const std::string& name,
                                                           const std::vector<int>& members) {
  const std::string group = "group '" + name + "' " + FormatMembers(members);
  if (std::find(members.begin(), members.end(), world_rank_) == members.end()) {
    return InvalidArgument(group + " does not contain this rank (" + std::to_string(world_rank_) +
                           ")");
  }
  for (int m : members) {
    if (m < 0 || m >= world_size_) {
      return InvalidArgument(group + ": rank " + std::to_string(m) + " is not in a world of " +
                             std::to_string(world_size_));
    }
  }
  if (std::set<int>(members.begin(), members.end()).size() != members.size()) {
    return InvalidArgument(group + " names a rank twice");
  }
  return Make(name, members, /*world=*/false);
}

Result<std::shared_ptr<Communicator>> Backend::Make(const std::string& name,
                                                    std::vector<int> members, bool world) {
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<GroupTransport> transport, NewGroup(name, members, world));
  return std::shared_ptr<Communicator>(
      new Communicator(shared_from_this(), ctx_, std::move(transport), name, std::move(members)));
}

Result<std::chrono::milliseconds> DefaultTimeout(const BackendOptions& options) {
  if (options.timeout) return *options.timeout;
  LOOM_ASSIGN_OR_RETURN(const int64_t ms, ReadTunable(kCommTimeoutTunable));
  return std::chrono::milliseconds(ms);
}

Result<std::shared_ptr<Backend>> CreateBackend(BackendKind kind, const BackendOptions& options) {
  switch (kind) {
    case BackendKind::kMpi:
      return CreateMpiBackend(options);
    case BackendKind::kLocal: {
      LOOM_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Backend>> world,
                            CreateLocalWorld(1, options));
      return world[0];
    }
    case BackendKind::kNccl:
#ifdef LOOM_HAVE_NCCL
      return CreateNcclBackend(options);
#else
      return Unimplemented(
          "communication backend 'nccl' is not built: it needs the CUDA toolkit and NCCL at "
          "build time (cmake/LoomCuda.cmake)");
#endif
  }
  return InvalidArgument("unknown communication backend kind");
}

}  // namespace loom
