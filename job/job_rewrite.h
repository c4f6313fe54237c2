// Typed edits of a job file's text. `loom launch` hands every worker the job as text (the workers
// parse it with job/job_config.h as `loom train` does); before that it writes in the layout the
// planner chose and the command line's overrides. This is the one place that edits job.yaml, so
// the launcher never touches YAML itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "job/job_config.h"
#include "job/job_overrides.h"
#include "model/config.h"
#include "parallel/layout.h"

namespace loom {

struct JobEdits {
  // The layout to run: tp, cp, pp, vpp, dp, zero and sp go into `parallel:`, and `schedule`
  // too when pp > 1.
  std::optional<Layout> layout;
  std::string schedule;
  std::optional<int64_t> micro_batch;  // data.micro_batch
  std::optional<Recompute> recompute;  // runtime.recompute
  JobOverrides overrides;              // the command line's (as ApplyOverrides applies them)
};

// `job`'s text (job.text, as read from job.path) with `edits` written in, every other setting
// kept. Override paths are made absolute (the flags are relative to where the command runs, the
// job's own paths to the job file); --steps keeps the LR decay where the job file puts it (its
// `steps` when schedule.decay_steps is not given), as `loom train --steps` does. Without edits
// the text is returned unchanged.
Result<std::string> RewriteJobText(const JobConfig& job, const JobEdits& edits);

}  // namespace loom
