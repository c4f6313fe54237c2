// `loom train --config job.yaml`: training on one process, or on every rank of an mpirun launch
// with the job's `parallel:` layout (validated on every rank before any work).
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/train_interrupt.h"
#include "cli/train_run.h"
#include "cli/train_watch.h"
#include "cli/validators.h"
#include "core/stop_signal.h"

namespace loom {
namespace {

// Sets *stopped_by to the signal the run stopped on after saving (checkpoint.signal), 0 if none.
Status RunTrain(const TrainOptions& opt, std::shared_ptr<Backend>* backend, int* stopped_by) {
  LOOM_ASSIGN_OR_RETURN(JobConfig job, LoadJobConfig(opt.config));
  LOOM_RETURN_IF_ERROR(ApplyOverrides(opt, &job));
  LOOM_RETURN_IF_ERROR(CheckTrainOutputs(opt));
  // As early as the job is known: a preemption signal that arrives while MPI starts or the
  // model is built is recorded (and acted on after the first step), not fatal.
  if (!job.checkpoint.dir.empty()) InstallStopSignal(job.checkpoint.stop_signal);
  WatchInterrupts(job);
  int world = 1, local = 1;
  LOOM_RETURN_IF_ERROR(StartMpi(job.parallel.present, backend, &world, &local));
  if (*backend) SetInterruptRank((*backend)->world_rank());
  RunHooks hooks;
  std::unique_ptr<TrainWatch> watch;  // the anomaly detector over the ranks (docs/FAULTS.md)
  if (*backend && world > 1 && job.detect.enabled) {
    LOOM_ASSIGN_OR_RETURN(const Layout layout, ResolveLayout(job, world));
    LOOM_ASSIGN_OR_RETURN(watch, TrainWatch::Start(job, layout, backend->get()));
    hooks.first.push_back(watch->reporter());
  }
  LOOM_ASSIGN_OR_RETURN(TrainSummary summary,
                        TrainJob(job, opt, backend->get(), world, local, hooks));
  if (watch) LOOM_RETURN_IF_ERROR(watch->Finish(job.steps));
  *stopped_by = summary.stopped_by_signal;
  return Status::Ok();
}

}  // namespace

void AddJobOverrideOptions(CLI::App* cmd, JobOverrides* opt) {
  cmd->add_option("--steps", opt->steps, "Override the job's number of steps")
      ->check(PositiveInteger());
  cmd->add_option("--checkpoint-dir", opt->checkpoint_dir,
                  "Save checkpoints here (overrides checkpoint.dir)")
      ->check(NonEmptyPath());
  cmd->add_option("--load", opt->load,
                  "Resume from this checkpoint root or step directory (overrides checkpoint.load)")
      ->check(NonEmptyPath());
  cmd->add_option("--init-from", opt->init_from,
                  "Start from this checkpoint's model weights only (or a Hugging Face "
                  ".safetensors file's or model directory's, imported on the way), when nothing "
                  "is resumed (fine-tuning; overrides checkpoint.init_from)")
      ->check(NonEmptyPath());
  cmd->add_flag(
      "--no-resume", opt->no_resume,
      "Do not resume: start from step 0 (refused when the checkpoint directory already holds "
      "checkpoints, which it would mix with)");
  cmd->add_flag("--no-load-optimizer", opt->no_load_optimizer,
                "Resuming checkpoint.load (or --load): take its weights, step and data position, "
                "start the AdamW state fresh (checkpoint.load_optimizer: false)");
  cmd->add_option("--precision", opt->precision,
                  "fp32, or bf16 compute with fp32 master weights (overrides `precision`)")
      ->check(PrecisionFlag());
  cmd->add_option("--exit-after-minutes", opt->exit_after_minutes,
                  "Save and stop (exit 75) after the first step that ends this long after the "
                  "start (overrides checkpoint.exit_after_minutes)")
      ->check(PositiveNumber(366.0 * 24 * 60));
}

void AddTrainCommand(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train a GPT model described by a job file");
  cmd->add_option("-c,--config", opt->config, "Job file (YAML)")->required();
  cmd->add_option("--threads", opt->threads,
                  "Threads per rank (default: runtime.threads or "
                  "cores / ranks on this host)")
      ->check(PositiveInteger());
  AddJobOverrideOptions(cmd, opt.get());
  cmd->add_option("--dump-losses", opt->dump_losses,
                  "Write per-step losses (\"step loss\" lines) to this file")
      ->check(NonEmptyPath());
  cmd->add_option("--dump-params", opt->dump_params,
                  "Write the final parameters (single-process layout) to this safetensors file")
      ->check(NonEmptyPath());
  cmd->callback([opt, exit_code] {
    std::shared_ptr<Backend> backend;
    int stopped_by = 0;
    Status st = RunCatching([&] { return RunTrain(*opt, &backend, &stopped_by); });
    if (!st.ok()) {
      // Before the ranks met (no backend yet), every rank fails alike on a bad job file.
      *exit_code = backend ? ReportError("train", st) : ReportStartupError("train", st);
      AbortAfterGrace(backend.get(), *exit_code);
      return;
    }
    // Stopped early on checkpoint.signal or the time limit, with the checkpoint committed: 128 +
    // the signal, as a process killed by it would report, or 75, so schedulers see the run as
    // interrupted.
    *exit_code = StopExitCode(stopped_by);
  });
}

}  // namespace loom
