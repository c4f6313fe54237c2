// The checkpoint deadline and the process-wide "in checkpoint I/O" counter.
#include "checkpoint/io_activity.h"

#include <atomic>

#include "core/tunables.h"

namespace loom {
namespace {
std::atomic<int> g_checkpoint_io{0};
}  // namespace

const IntTunable kCkptTimeoutTunable =
    RegisterTunable({"LOOM_CKPT_TIMEOUT_MS", 600000, 1, kMaxTunableMs, "a number of ms"});

int64_t CheckpointTimeoutMs() {
  return TunableOr(kCkptTimeoutTunable);
}

bool CheckpointIoInProgress() {
  return g_checkpoint_io.load() > 0;
}

CheckpointIoScope::CheckpointIoScope() {
  g_checkpoint_io.fetch_add(1);
}

CheckpointIoScope::~CheckpointIoScope() {
  g_checkpoint_io.fetch_sub(1);
}

}  // namespace loom
