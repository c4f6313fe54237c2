// What an interrupted `loom train` says before it dies: Ctrl-C, SIGTERM or SIGHUP (whichever is
// not the job's checkpoint.signal, which saves and stops instead) ends the run at once, as
// before, but first world rank 0 names the newest committed checkpoint and whether the same
// command resumes from it (DescribeRestart), as `loom launch` does for its workers.
#pragma once

#include "worker/job_config.h"

namespace loom {

// Must run before any other thread exists (MPI, OpenMP, the checkpoint writer): it blocks the
// signals in this thread, so every thread started later inherits the block, and starts one thread
// that waits for them. On the first, that thread gives the signals their default action back,
// prints (when SetInterruptRank has not named another rank than 0) and re-raises it, so the
// process still ends by the signal (exit 130 for Ctrl-C); a second signal while it prints ends
// it at once.
void WatchInterrupts(const JobConfig& job);
// This process's world rank, once known: only rank 0 prints.
void SetInterruptRank(int rank);

}  // namespace loom
