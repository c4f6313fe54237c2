// A warning at the start of a run whose checkpoint.dir has less room than its saves will need
// at once, so a full disk does not come as a surprise hours in (a save that finds the disk full
// fails the job).
#pragma once

#include <cstdint>

#include "job/job_config.h"

namespace loom {

// Logs a warning when checkpoint.dir's file system has less free space than the saves from
// `start_step` on will need at once (12 bytes per parameter each; retention, milestones and the
// checkpoints already there counted).
void WarnIfShortOfSpace(const JobConfig& job, int64_t start_step);

}  // namespace loom
