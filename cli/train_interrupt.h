// What an interrupted `loom train` says before it dies: Ctrl-C, SIGTERM or SIGHUP (whichever is
// not the job's checkpoint.signal, which saves and stops instead) ends the run at once, as
// before, but first world rank 0 names the newest committed checkpoint and whether the same
// command resumes from it (DescribeRestart), as `loom launch` does for its workers.
#pragma once

#include "worker/job_config.h"

namespace loom {

// Installs handlers for those signals (not for one ignored from the start: nohup, a script's
// background job) that wake a thread through a pipe. On the first, that thread gives the signals
// their default action back, removes the temporary files of a checkpoint.export in progress,
// prints (world rank 0 only) and re-raises it, so the process still ends by the signal (exit
// 130 for Ctrl-C); a second signal while it prints ends it at once. No signal mask changes:
// threads and programs started later are unaffected.
void WatchInterrupts(const JobConfig& job);
// This process's world rank, once known: only rank 0 prints.
void SetInterruptRank(int rank);

}  // namespace loom
