// The job settings the command line overrides (`loom train`, `loom launch`, `loom coordinator`
// take the same flags): applied to a parsed job, recorded for the checkpoints' provenance, and
// remembered per setting so that errors name the flag the user typed instead of the job file's
// field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "job/job_config.h"

namespace loom {

struct JobOverrides {
  int64_t steps = 0;                 // --steps (0: not given)
  std::string checkpoint_dir, load;  // --checkpoint-dir, --load
  std::string init_from;             // --init-from
  bool no_resume = false;            // --no-resume
  double exit_after_minutes = 0;     // --exit-after-minutes (0: not given)
  bool no_load_optimizer = false;    // --no-load-optimizer
  std::string precision;             // --precision fp32 | bf16 ("": not given)

  bool empty() const {
    return steps == 0 && checkpoint_dir.empty() && load.empty() && init_from.empty() &&
           !no_resume && exit_after_minutes == 0 && !no_load_optimizer && precision.empty();
  }
};

// Applies `o` to `job`, records the flags with their values in job->overrides (paths absolute:
// the record is read from elsewhere), marks the settings they set, and checks the checkpoint
// section's cross-field rules (CheckCheckpointConfig).
Status ApplyOverrides(const JobOverrides& o, JobConfig* job);

// Where a checkpoint setting came from, for errors: "--load" when the flag set it, else
// "<job file>: field 'checkpoint.load'". `key` is dir, load, init_from, resume,
// exit_after_minutes or load_optimizer.
std::string CheckpointSetting(const JobConfig& job, std::string_view key);
// Records that `flag` ("--steps", "--checkpoint-dir", "--load", "--init-from", "--no-resume",
// "--exit-after-minutes", "--no-load-optimizer", "--precision": every flag ApplyOverrides records)
// set its setting (a job a launcher rewrote from its command line); false for any other name.
bool MarkSetByFlag(std::string_view flag, JobConfig* job);

// A warning when --steps runs the job past the end of the LR decay that the job file's `steps`
// set (which --steps does not move), so that steps after `start_step` run at min_lr; "" when
// not (a decay_steps set on purpose shorter than the run is not warned about). `loom train`'s
// rank 0 says it, and `loom launch`, whose workers read the decay written out.
std::string StepsPastDecayWarning(const JobConfig& job, int64_t start_step);

}  // namespace loom
