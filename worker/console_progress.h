// The console of `loom train`: what a run prints on stdout (world rank 0) and logs (every rank).
// At the start, the model, the layout, and what was resumed; a progress line per step in place on
// a terminal of one process, else every runtime.log_every steps (core/progress_line.h), with the
// step time averaged over the steps since the last line; evaluation lines; a stop after a save;
// at the end the losses, the checkpoints saved, the sample (as valid UTF-8, core/utf8.h), and
// each rank's memory report with its activation peak against the plan. `loom worker` has no
// console (the launcher shows the job's progress from the coordinator reports instead).
#pragma once

#include <cstdint>
#include <memory>

#include "core/progress_line.h"
#include "worker/step_observer.h"

namespace loom {

class ConsoleProgress : public StepObserver {
 public:
  // `root`: this rank prints to stdout (world rank 0); every rank logs its memory report.
  // `one_process`: not one rank of many (a terminal line may be rewritten in place).
  ConsoleProgress(bool root, bool one_process) : root_(root), one_process_(one_process) {}

  Status OnStart(const RunStart& start) override;
  Status OnStep(const StepEvent& event) override;
  Status OnEval(int64_t step, double val_loss) override;
  Status OnStop(int64_t step, int reason) override;
  Status OnEnd(const RunEnd& end) override;
  void OnFail(const Status& status) override;

 private:
  void PrintResumed(const RunStart& start) const;
  void LogMemory(const ActivationReport& a) const;

  const bool root_, one_process_;
  const JobConfig* job_ = nullptr;  // RunStart's, valid for the run
  const CheckpointStats* checkpoint_ = nullptr;
  std::unique_ptr<ProgressLine> line_;
  int64_t tokens_per_step_ = 0;
  double window_s_ = 0;  // step time since the last full line
  int64_t window_steps_ = 0;
};

}  // namespace loom
