// The checkpoint deadline and the process-wide "in checkpoint I/O" counter.
#include "checkpoint/io_activity.h"

#include <atomic>

#include "core/env.h"

namespace loom {
namespace {
std::atomic<int> g_checkpoint_io{0};
}  // namespace

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
