// What a training run prints (see console_progress.h).
#include "worker/console_progress.h"

#include <algorithm>
#include <cstdio>

#include "checkpoint/format.h"
#include "core/logging.h"
#include "core/memory.h"
#include "core/stop_signal.h"
#include "core/utf8.h"
#include "worker/checkpointer.h"

namespace loom {

Status ConsoleProgress::OnStart(const RunStart& s) {
  job_ = &s.job;
  checkpoint_ = s.checkpoint;
  tokens_per_step_ = s.job.data.global_batch * s.job.data.seq;
  line_ = std::make_unique<ProgressLine>(
      ProgressLineOptions{.in_place = root_ && StdoutUpdatesInPlace(one_process_),
                          .log_every = s.job.runtime.log_every,
                          .steps = s.job.steps,
                          .first_step = s.start_step});
  if (!root_) return Status::Ok();
  std::printf(
      "loom train: %s | %s %.2fM parameters | layout %s | %s | %d threads/rank | %lld steps of "
      "%lld tokens\n",
      s.job.path.c_str(), ModelFamilyName(s.job.model.family), s.params / 1e6,
      s.layout.ToString().c_str(),
      s.job.precision == Precision::kBf16 ? "bf16 compute, fp32 master weights" : "fp32", s.threads,
      static_cast<long long>(s.job.steps), static_cast<long long>(tokens_per_step_));
  std::printf("activations kept per layer: %.1f MiB per rank (recompute %s)\n",
              s.activation_bytes_per_layer / 1048576.0,
              RecomputeName(s.job.runtime.recompute.value_or(Recompute::kNone)));
  PrintResumed(s);
  std::fflush(stdout);
  return Status::Ok();
}

void ConsoleProgress::PrintResumed(const RunStart& s) const {
  const CheckpointStats* c = s.checkpoint;
  if (c != nullptr && !c->resumed_from.empty()) {
    // A resume into another layout says so: the checkpoint is resharded as it loads.
    const std::string now = s.layout.ToString();
    const int64_t steps = s.job.steps;
    const std::string where =
        s.start_step >= steps
            ? "already at step " + std::to_string(s.start_step) + " of " + std::to_string(steps)
            : "continuing at step " + std::to_string(s.start_step + 1);
    std::printf("resumed from %s: %s%s%s\n", c->resumed_from.c_str(), where.c_str(),
                c->resumed_layout == now
                    ? ""
                    : (" (saved with " + c->resumed_layout + ", loaded into " + now + ")").c_str(),
                c->optimizer_fresh ? "; without its optimizer state: AdamW starts fresh" : "");
  }
  if (c != nullptr && !c->initialized_from.empty()) {
    std::printf(
        "initialised from %s: model weights only (step, data position, LR schedule and "
        "optimizer state start fresh)\n",
        c->initialized_from.c_str());
  }
}

Status ConsoleProgress::OnStep(const StepEvent& e) {
  window_s_ += e.step_s;
  ++window_steps_;
  const double step_s = window_s_ / static_cast<double>(window_steps_);
  const bool full_line = e.step % job_->runtime.log_every == 0 || e.step == e.steps;
  if (root_) {
    line_->Show(
        e.step, false, "loss %.4f | lr %.2e | norm %.3f | %7.0f tok/s | %6.1f ms/step | ETA %s",
        e.stats.loss, e.stats.lr, e.stats.grad_norm, tokens_per_step_ / step_s, step_s * 1e3,
        FormatDuration(step_s * static_cast<double>(e.steps - e.step)).c_str());
  }
  if (full_line) {  // the next line's average starts here
    window_s_ = 0;
    window_steps_ = 0;
  }
  return Status::Ok();
}

Status ConsoleProgress::OnEval(int64_t step, double val_loss) {
  if (!root_) return Status::Ok();
  line_->Break();
  std::printf("eval  step %lld | val loss %.4f\n", static_cast<long long>(step), val_loss);
  return Status::Ok();
}

Status ConsoleProgress::OnStop(int64_t step, int reason) {
  if (!root_) return Status::Ok();
  line_->Break();
  std::printf("stopped after step %lld on %s: saved %s; the same command resumes it\n",
              static_cast<long long>(step), StopSignalName(reason).c_str(),
              JoinPath(job_->checkpoint.dir, StepDirName(step)).c_str());
  std::fflush(stdout);
  return Status::Ok();
}

void ConsoleProgress::OnFail(const Status&) {
  if (line_) line_->Break();
}

Status ConsoleProgress::OnEnd(const RunEnd& end) {
  const TrainSummary& s = end.summary;
  const double val = s.evals.empty() ? 0 : s.evals.back().second;
  if (root_ && s.losses.empty()) {
    std::printf("done: nothing to train (already at step %lld of %lld) | val loss %.4f\n",
                static_cast<long long>(s.first_step), static_cast<long long>(job_->steps), val);
  } else if (root_) {
    const size_t tail = std::min<size_t>(10, s.losses.size());
    std::printf(
        "done in %s: train loss %.4f (first step %.4f, mean of last %zu steps) | val loss "
        "%.4f | %.0f tok/s\n",
        FormatDuration(end.total_s).c_str(), s.train_loss, s.losses.front(), tail, val,
        s.tokens_per_second);
  }
  if (root_ && checkpoint_ != nullptr && checkpoint_->saves > 0) {
    std::printf("checkpoints: %d saved to %s | training blocked %.1f ms in total (rank 0)\n",
                checkpoint_->saves, job_->checkpoint.dir.c_str(), checkpoint_->stall_s * 1e3);
  }
  LogMemory(end.activations);
  if (root_ && job_->sample.tokens > 0) {
    // A byte-level model's bytes need not be UTF-8 (nor free of NUL, which would end %s early).
    std::printf("--- sample (%lld tokens, temperature %.2f) ---\n%s\n---\n",
                static_cast<long long>(job_->sample.tokens), job_->sample.temperature,
                PrintableUtf8(job_->sample.prompt + s.sample).c_str());
  }
  std::fflush(stdout);
  return Status::Ok();
}

// Every rank's memory at the end, with its activation peak against the plan: scratch plus whole
// in-flight slots, as many as the pipeline schedule's simulator predicts.
void ConsoleProgress::LogMemory(const ActivationReport& a) const {
  LOOM_LOG(INFO, TRAIN) << "memory: " << MemReport();
  LOOM_LOG(INFO, TRAIN) << "activation peak bytes " << a.peak;
  if (a.simulated_in_flight < 0) return;
  LOOM_LOG(INFO, TRAIN) << "pipeline activations: peak " << a.peak << " bytes = scratch "
                        << a.scratch << " + " << a.in_flight << " in flight x slot " << a.slot
                        << " (remainder " << a.remainder << "); simulated peak in flight "
                        << a.simulated_in_flight << " (" << a.schedule << ", pp rank " << a.pp_rank
                        << ")";
}

}  // namespace loom
