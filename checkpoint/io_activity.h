// How long checkpoint I/O may take (LOOM_CKPT_TIMEOUT_MS), and whether this process is in a
// stretch of it that the step loop waits for — loading, waiting for a save's state copy or for
// a commit. Heartbeats carry the flag so the launcher allows such a rank the time its I/O needs
// (cli/launch_command.cc) instead of taking it for hung.
#pragma once

#include <cstdint>

#include "core/tunables.h"

namespace loom {

extern const IntTunable kCkptTimeoutTunable;  // LOOM_CKPT_TIMEOUT_MS, below

// LOOM_CKPT_TIMEOUT_MS (default 10 minutes, at most 30 days): how long a checkpoint's I/O may
// take before a wait on it fails (writer, commit, load votes). The launcher allows as long
// while a rank's heartbeats say it is loading or finishing a save (CheckpointIoInProgress).
int64_t CheckpointTimeoutMs();

// Whether this process is loading a checkpoint or waiting for a save now (any thread).
bool CheckpointIoInProgress();

// Marks a stretch of checkpoint I/O the step loop waits for, for its lifetime. Scopes nest;
// thread-safe.
class CheckpointIoScope {
 public:
  CheckpointIoScope();
  ~CheckpointIoScope();
  CheckpointIoScope(const CheckpointIoScope&) = delete;
  CheckpointIoScope& operator=(const CheckpointIoScope&) = delete;
};

}  // namespace loom
