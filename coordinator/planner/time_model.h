// Step time of one candidate layout: the analytic part (per-layer compute op by op, exposed
// communication per parallel dimension, data-parallel overlap, optimizer) and the pipeline part
// (the schedule simulator run on per-micro-batch chunk costs, pipeline_model.h).
//
// How the runtime overlaps, and so how the model counts (docs/PLANNER.md):
//  - tensor-parallel collectives sit on the critical path of every layer: fully exposed;
//  - context-parallel K/V ring steps overlap the attention block they feed: the excess shows;
//  - pipeline transfers are asynchronous sends; the simulator delays the receiver;
//  - ZeRO 0/1 reduce gradients bucket by bucket (one bucket per layer) during the last
//    micro-batch's backward, ZeRO 2 after every micro-batch's backward of each layer, ZeRO 3 also
//    gathers each layer before its forward and backward (the next one prefetched); ZeRO 1/2
//    gather the updated parameters in the background during the next forward;
//  - the optimizer step is memory-bound and runs after the reductions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/plan_job.h"
#include "coordinator/planner/hardware.h"
#include "coordinator/planner/memory_model.h"
#include "coordinator/planner/pipeline_model.h"
#include "coordinator/planner/placement.h"
#include "parallel/layout.h"

namespace loom {

struct Candidate {
  Layout layout;
  int64_t micro_batch = 1;
  RecomputeMode recompute = RecomputeMode::kNone;
  ScheduleKind schedule = ScheduleKind::k1F1B;
  std::string ToString() const;  // "tp=8 cp=1 pp=8 vpp=2 dp=24 zero=0 sp=off mb=1 rc=full ..."
};

// Seconds per micro-batch through one local chunk, split by cause.
struct ChunkCosts {
  double compute_fwd = 0, compute_bwd = 0;  // backward includes recompute
  double tp_fwd = 0, tp_bwd = 0;            // exposed tensor-parallel collectives
  double cp_fwd = 0, cp_bwd = 0;            // exposed context-parallel ring transfers
  double zero_fwd = 0, zero_bwd = 0;        // exposed ZeRO 2/3 per-micro-batch traffic
  double fwd() const { return compute_fwd + tp_fwd + cp_fwd + zero_fwd; }
  double bwd() const { return compute_bwd + tp_bwd + cp_bwd + zero_bwd; }
};

// Everything of one step on the critical (busiest) pipeline rank, in seconds.
struct StepBreakdown {
  double compute = 0;     // forward, backward and recompute kernels
  double tp = 0, cp = 0;  // exposed TP / CP communication
  double zero = 0;        // exposed per-micro-batch ZeRO 2/3 traffic
  double bubble = 0;      // pipeline idle time, including waits for activation transfers
  double pp = 0;          // exposed tied-embedding exchange between first and last stage
  double dp = 0;          // exposed gradient reduction / parameter gather (after the pipeline)
  double optimizer = 0;
  double step = 0;
};

struct Prediction {
  Candidate candidate;
  int64_t micro_batches = 0;  // per pipeline per step
  StepBreakdown time;
  std::vector<MemoryBreakdown> stage_memory;  // per pipeline rank
  int peak_stage = 0;
  double peak_memory = 0;  // bytes, worst stage
  double capacity = 0;     // usable bytes per rank (device memory minus headroom)
  double tokens_per_s = 0;
  double tflops_per_device = 0;  // achieved, counting recomputation (as Megatron reports)
  double mfu = 0;                // model FLOPs (no recomputation) / peak
  bool fits() const { return peak_memory <= capacity; }
};

// Prices candidates for one job on one placement. Not thread-safe (memoises).
class TimeModel {
 public:
  TimeModel(const PlanJob& job, const Hardware& hw, const RankPlacement& placement,
            PathCache* paths, PipelineModel* pipeline);

  ChunkCosts Chunk(const Candidate& c) const;
  // Memory of every pipeline stage (needs the in-flight counts of the schedule).
  Result<Prediction> Memory(const Candidate& c);
  // A lower bound of the step time without running the simulator (no bubble).
  double LowerBound(const Candidate& c) const;
  // The full prediction: memory, pipeline simulation, overlap.
  Result<Prediction> Predict(const Candidate& c);

 private:
  struct Edges {
    double first = 0, last = 0;        // compute per micro-batch (forward + backward)
    double first_tp = 0, last_tp = 0;  // exposed TP collectives per micro-batch
  };
  Edges EdgeCosts(const Candidate& c) const;
  double Transfer(const Candidate& c) const;  // one pipeline message
  // Exposed data-parallel time after the pipeline and the optimizer step.
  void AfterPipeline(const Candidate& c, const ChunkCosts& k, StepBreakdown* t) const;
  double StageParams(const Candidate& c) const;  // parameters of the largest stage, per rank
  int64_t MicroBatches(const Candidate& c) const;

  const PlanJob& job_;
  const Hardware& hw_;
  const RankPlacement& placement_;
  PathCache* paths_;
  PipelineModel* pipeline_;
};

}  // namespace loom
