// The seam between the training loop and everything that watches it. The trainer runs the loop
// and publishes what happens — the run's start, every step, every evaluation, a stop after a save,
// the last step, the end — to its observers, in the order they were given: the coordinator
// reporter (`loom worker`), the checkpointer, the console progress (world rank 0 of `loom train`),
// and later the in-memory snapshots and the metrics. An error from an observer stops training
// with that error.
//
// Collective hooks (StopReason, OnStop, OnFinish) are called on every rank at the same step; the
// others are local.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "job/job_config.h"
#include "parallel/layout.h"

namespace loom {

struct CheckpointStats;

struct StepStats {
  double loss = 0;       // mean over the global batch's tokens (before the update)
  double grad_norm = 0;  // global L2 norm before clipping
  double lr = 0;
};

struct TrainSummary {
  int64_t first_step = 0;                         // steps done before this run (resumed)
  std::vector<double> losses;                     // per step run: steps first_step+1, ...
  std::vector<std::pair<int64_t, double>> evals;  // (step, val loss)
  double tokens_per_second = 0;
  double train_loss = 0;  // mean of the last (up to 10) steps
  std::string sample;
  // Set when the run stopped before job.steps on checkpoint.signal or the time limit, after
  // saving step stopped_at (no final evaluation or sample then).
  int stopped_by_signal = 0;
  int64_t stopped_at = 0;
};

// Activation memory at the end of a run against the plan: the peak is the chunk's scratch plus
// whole in-flight slots (a pipeline's in-flight count is what its schedule's simulator predicts).
struct ActivationReport {
  int64_t peak = 0;                      // bytes (MemTag::kActivations)
  int64_t scratch = 0;                   // bytes every chunk keeps
  int64_t slot = 0;                      // bytes of one in-flight micro-batch
  int64_t in_flight = 0, remainder = 0;  // (peak - scratch) = in_flight * slot + remainder
  // Pipelines without interleaving: the simulator's peak in-flight count of this stage (-1: none)
  int64_t simulated_in_flight = -1;
  std::string schedule;  // the pipeline schedule's name ("" without pipeline)
  int pp_rank = 0;
};

// Where the run was restored from at its start, when that was an in-memory snapshot, or why the
// snapshots could not be used (a restarted job; see worker/snapshot_restore.h).
struct RestoreReport {
  std::string from;  // "in-memory snapshot of step 12: ..." ("" when none was restored)
  std::string why_not;
  int64_t step = 0;
  double seconds = 0;
};

struct RunStart {
  const JobConfig& job;
  const Layout& layout;
  int64_t start_step;  // steps done before this run (resumed)
  double params;       // parameters of the whole model
  int threads;         // per rank
  int64_t activation_bytes_per_layer;
  const CheckpointStats* checkpoint;  // what was resumed or initialised from (null: nothing)
  RestoreReport restore;              // a restarted job's snapshot restore
};

struct StepEvent {
  int64_t step;   // steps done, this one included (1-based)
  int64_t steps;  // the job's
  StepStats stats;
  double step_s;  // wall time since the previous step ended (or the loop started)
  int64_t snapshot_step = 0;    // the newest committed in-memory snapshot (0: none)
  uint64_t snapshot_bytes = 0;  // this rank's image
  // Saves so far (checkpoint/save_engine.h SaveStats): the newest stored step of each kind, the
  // seconds it took, and the time the loop was blocked by saving.
  int64_t checkpoint_step = 0;
  double checkpoint_s = 0, checkpoint_stall_s = 0;
  double snapshot_s = 0, snapshot_stall_s = 0;
};

struct RunEnd {
  const TrainSummary& summary;
  double total_s;  // the steps and the final save, without the final evaluation
  ActivationReport activations;
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual Status OnStart(const RunStart&) { return Status::Ok(); }
  virtual Status OnStep(const StepEvent& event) = 0;
  virtual Status OnEval(int64_t /*step*/, double /*val_loss*/) { return Status::Ok(); }
  // Collective, after step `step` and its evaluation: this observer's reason to stop now
  // (a signal number, kStopTimeLimit; 0: go on). The largest of all observers wins.
  virtual Result<int> StopReason(int64_t /*step*/) { return 0; }
  // Collective: training stops after `step` for `reason` (the checkpointer saves it here).
  virtual Status OnStop(int64_t /*step*/, int /*reason*/) { return Status::Ok(); }
  // Collective: every step ran; before the final evaluation (the final save and export).
  virtual Status OnFinish(int64_t /*steps*/) { return Status::Ok(); }
  virtual Status OnEnd(const RunEnd&) { return Status::Ok(); }
  // The loop failed with `status` (returned to the caller after this).
  virtual void OnFail(const Status& /*status*/) {}
};

}  // namespace loom
