// What an interrupted `loom train` says before it dies: Ctrl-C, SIGTERM or SIGHUP (whichever is
// not the job's checkpoint.signal, which saves and stops instead) ends the run at once, as
// before, but first world rank 0 names the newest committed checkpoint and whether the same
// command resumes from it (DescribeRestart), as `loom launch` does for its workers.
#pragma once

#include "job/job_config.h"

namespace loom {

// Records those signals with core/interrupt's handlers (one ignored from the start, as under
// nohup, stays ignored; a second signal has its default action) and starts a thread that, on
// the first, removes the temporary files of a checkpoint.export in progress, prints (world rank
// 0 only) and re-raises it, so the process still ends by the signal (exit 130 for Ctrl-C).
void WatchInterrupts(const JobConfig& job);
// This process's world rank, once known: only rank 0 prints.
void SetInterruptRank(int rank);

}  // namespace loom
