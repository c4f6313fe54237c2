// `loom train --config job.yaml`: single-process training with a live progress line.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/logging.h"
#include "core/threads.h"
#include "worker/job_config.h"
#include "worker/trainer.h"

namespace loom {
namespace {

struct TrainOptions {
  std::string config;
  int threads = 0;
  int64_t steps = 0;
};

Status RunTrain(const TrainOptions& opt) {
  LOOM_ASSIGN_OR_RETURN(JobConfig job, LoadJobConfig(opt.config));
  if (opt.steps > 0) job.steps = opt.steps;
  int threads = opt.threads > 0 ? opt.threads
                : job.runtime.threads > 0 ? static_cast<int>(job.runtime.threads)
                                          : DefaultThreads(1);
  ConfigureThreads(threads);
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(job));
  LOOM_ASSIGN_OR_RETURN(TrainSummary summary, trainer->Run());
  (void)summary;
  return Status::Ok();
}

}  // namespace

void AddTrainCommand(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train a GPT model described by a job file");
  cmd->add_option("-c,--config", opt->config, "Job file (YAML)")->required();
  cmd->add_option("--threads", opt->threads, "Threads (default: runtime.threads or all cores)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--steps", opt->steps, "Override the job's number of steps")
      ->check(CLI::PositiveNumber);
  cmd->callback([opt, exit_code] {
    Status st = RunTrain(*opt);
    *exit_code = st.ok() ? 0 : ReportError("train", st);
  });
}

}  // namespace loom
