// The bulk transport factory: UCX where built and able to start, else the communicator.
#include "comm/bulk_transport.h"

#include <cstdlib>
#include <cstring>

#include "core/logging.h"
#include "core/tunables.h"
#ifdef LOOM_HAVE_UCX
#include "comm/ucx/ucx_bulk.h"
#endif

namespace loom {
namespace {

Result<BulkKind> ParseKind(const char* v) {
  if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return BulkKind::kAuto;
  if (std::strcmp(v, "ucx") == 0) return BulkKind::kUcx;
  if (std::strcmp(v, "comm") == 0 || std::strcmp(v, "mpi") == 0) return BulkKind::kComm;
  return InvalidArgument(std::string("environment variable LOOM_SNAPSHOT_TRANSPORT: expected "
                                     "auto, ucx or comm (alias mpi), got '") +
                         v + "'");
}

Status CheckKind() {
  return ParseKind(std::getenv("LOOM_SNAPSHOT_TRANSPORT")).status();
}
const bool kKindChecked = RegisterTunableCheck("LOOM_SNAPSHOT_TRANSPORT", &CheckKind);

}  // namespace

bool UcxBuilt() {
#ifdef LOOM_HAVE_UCX
  return true;
#else
  return false;
#endif
}

Result<BulkKind> SnapshotTransportKind() {
  return ParseKind(std::getenv("LOOM_SNAPSHOT_TRANSPORT"));
}

Result<std::unique_ptr<BulkTransport>> CreateBulkTransport(BulkKind kind, Communicator* group,
                                                           const std::vector<BulkWindow>& windows) {
  if (kind == BulkKind::kComm) return CreateBulkOverComm(group, windows);
#ifdef LOOM_HAVE_UCX
  Result<std::unique_ptr<BulkTransport>> ucx = CreateUcxBulk(group, windows);
  if (ucx.ok() || kind == BulkKind::kUcx) return ucx;
  if (group->rank() == 0) {
    LOOM_LOG(WARN, COMM) << "snapshot fragments go over the communicator: "
                         << ForUser(ucx.status(), LogSubsys::COMM);
  }
  return CreateBulkOverComm(group, windows);
#else
  if (kind == BulkKind::kUcx) {
    return FailedPrecondition(
        "LOOM_SNAPSHOT_TRANSPORT=ucx: this build has no UCX (install libucx-dev and rebuild)");
  }
  return CreateBulkOverComm(group, windows);
#endif
}

}  // namespace loom
