// Command-line overrides of job settings, and which flag set which setting.
#include "job/job_overrides.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <utility>

namespace loom {
namespace {

// The flags that set checkpoint settings, one row each: the key under `checkpoint:`, the flag, and
// the bit that records that the flag set it. CheckpointSetting and MarkSetByFlag both read it.
struct CheckpointFlag {
  std::string_view key, flag;
  bool CheckpointConfig::*from_flag;
};
constexpr CheckpointFlag kCheckpointFlags[] = {
    {"dir", "--checkpoint-dir", &CheckpointConfig::dir_from_flag},
    {"load", "--load", &CheckpointConfig::load_from_flag},
    {"init_from", "--init-from", &CheckpointConfig::init_from_from_flag},
    {"resume", "--no-resume", &CheckpointConfig::resume_from_flag},
    {"exit_after_minutes", "--exit-after-minutes", &CheckpointConfig::exit_after_from_flag},
    {"load_optimizer", "--no-load-optimizer", &CheckpointConfig::load_optimizer_from_flag},
};

// For the record (checkpoints' provenance): what the command line changed.
void RecordOverrides(const JobOverrides& o, JobConfig* job) {
  if (o.steps > 0) job->overrides.push_back("--steps " + std::to_string(o.steps));
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string*>{"--checkpoint-dir", &o.checkpoint_dir},
        {"--load", &o.load},
        {"--init-from", &o.init_from}}) {
    if (value->empty()) continue;
    std::error_code ec;  // recorded absolute: the record is read from elsewhere
    const std::filesystem::path abs = std::filesystem::absolute(*value, ec);
    job->overrides.push_back(std::string(flag) + " " + (ec ? *value : abs.string()));
  }
  if (!o.precision.empty()) job->overrides.push_back("--precision " + o.precision);
  if (o.no_resume) job->overrides.push_back("--no-resume");
  if (o.no_load_optimizer) job->overrides.push_back("--no-load-optimizer");
  if (o.exit_after_minutes > 0) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "--exit-after-minutes %g", o.exit_after_minutes);
    job->overrides.push_back(buf);
  }
}

}  // namespace

Status ApplyOverrides(const JobOverrides& o, JobConfig* job) {
  RecordOverrides(o, job);
  if (o.steps > 0) job->steps = o.steps, job->steps_from_flag = true;
  if (!o.precision.empty()) {
    Result<Precision> p = ParsePrecision(o.precision);
    if (!p.ok()) return InvalidArgument("--precision: " + p.status().message());
    job->precision = job->plan.precision = *p;
  }
  CheckpointConfig& c = job->checkpoint;
  if (!o.checkpoint_dir.empty()) c.dir = o.checkpoint_dir, c.dir_from_flag = true;
  if (!o.load.empty()) c.load = o.load, c.load_from_flag = true;
  if (!o.init_from.empty()) c.init_from = o.init_from, c.init_from_from_flag = true;
  if (o.no_resume) c.resume = false, c.resume_from_flag = true;
  if (o.no_load_optimizer) c.load_optimizer = false, c.load_optimizer_from_flag = true;
  if (o.exit_after_minutes > 0) {
    c.exit_after_minutes = o.exit_after_minutes, c.exit_after_from_flag = true;
  }
  return CheckCheckpointConfig(*job);
}

std::string CheckpointSetting(const JobConfig& job, std::string_view key) {
  for (const CheckpointFlag& f : kCheckpointFlags) {
    if (f.key == key && job.checkpoint.*f.from_flag) return std::string(f.flag);
  }
  return job.path + ": field 'checkpoint." + std::string(key) + "'";
}

bool MarkSetByFlag(std::string_view flag, JobConfig* job) {
  if (flag == "--steps") return job->steps_from_flag = true;
  if (flag == "--precision") return true;  // no error names the flag rather than the field
  for (const CheckpointFlag& f : kCheckpointFlags) {
    if (f.flag == flag) return job->checkpoint.*f.from_flag = true;
  }
  return false;
}

std::string StepsPastDecayWarning(const JobConfig& job, int64_t start_step) {
  const ScheduleConfig& sc = job.schedule;
  const int64_t end = std::max(sc.decay_steps, sc.warmup_steps);
  if (!sc.decay_from_steps || !job.steps_from_flag || job.steps <= end || job.steps <= start_step ||
      job.optim.min_lr == job.optim.lr) {
    return "";
  }
  const int64_t first = std::max(start_step, end) + 1;
  std::ostringstream w;
  w << "the LR decay ends at step " << end << " (the job file's steps; --steps does not move it): "
    << (first == job.steps ? "step " + std::to_string(first)
                           : "steps " + std::to_string(first) + "-" + std::to_string(job.steps))
    << (first == job.steps ? " runs" : " run") << " at min_lr " << job.optim.min_lr
    << " (to decay over the longer run, raise `steps` in the job file or set "
       "schedule.decay_steps)";
  return w.str();
}

}  // namespace loom
