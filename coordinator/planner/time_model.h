// Step time of one candidate layout: the analytic part (per-layer compute op by op, exposed
// communication per parallel dimension, data-parallel overlap, optimizer) and the pipeline part
// (the schedule simulator run on per-micro-batch chunk costs, pipeline_model.h).
//
// How the runtime overlaps, and so how the model counts (docs/PLANNER.md, overlap_model.h):
//  - tensor-parallel collectives sit on the critical path of every layer: fully exposed;
//  - context-parallel K/V blocks travel while the previous block is folded in (the excess over
//    that block's attention shows); in the backward the dK/dV accumulators travel after each
//    block and are waited for at once: exposed;
//  - pipeline transfers are asynchronous sends; the simulator delays the receiver;
//  - ZeRO 3 gathers each layer's bucket before its forward and again before its backward, in
//    every micro-batch, with one bucket prefetched: the first layer of every chunk's forward and
//    backward waits for its whole gather, every other gather shows only by what exceeds the
//    previous layer's compute; ZeRO 2 and 3 reduce-scatter each layer's gradient after its
//    backward in every micro-batch (ZeRO 3: the chunk's last one delays the next gather;
//    ZeRO 2: it hides behind the next chunk's forward and backward if the link can carry it);
//    ZeRO 0/1 reduce gradients bucket by bucket (one bucket per layer) during the last
//    micro-batch's backward; ZeRO 1/2 gather the updated parameters during the next forward;
//  - asynchronous traffic shares its link with every other dimension on that link (NVLink inside
//    a node, the node's network between nodes) and slows the compute it overlaps
//    (Hardware::overlap_slowdown);
//  - the optimizer step is memory-bound and runs after the reductions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/plan_job.h"
#include "coordinator/planner/hardware.h"
#include "coordinator/planner/layer_model.h"
#include "coordinator/planner/memory_model.h"
#include "coordinator/planner/overlap_model.h"
#include "coordinator/planner/pipeline_model.h"
#include "coordinator/planner/placement.h"
#include "model/config.h"
#include "parallel/layout.h"

namespace loom {

struct Candidate {
  Layout layout;
  int64_t micro_batch = 1;
  Recompute recompute = Recompute::kNone;
  ScheduleKind schedule = ScheduleKind::k1F1B;
  std::string ToString() const;  // "tp=8 cp=1 pp=8 vpp=2 dp=24 zero=0 sp=off mb=1 rc=full ..."
};

// Seconds per micro-batch through one local chunk in one direction (the backward includes its
// recompute), split by cause.
struct PassCosts {
  double compute = 0;  // kernels
  double tp = 0;       // exposed tensor-parallel collectives
  double cp = 0;       // exposed context-parallel ring transfers
  double zero = 0;     // exposed ZeRO 2/3 per-micro-batch traffic
  double shared = 0;   // exposed because several dimensions share a link
  double slow = 0;     // compute slowed by the transfers it overlaps
  LinkLoad load;       // busy seconds of each link class, all traffic
  double total() const { return compute + tp + cp + zero + shared + slow; }
};

struct ChunkCosts {
  PassCosts f, b;   // forward, backward
  CommBytes bytes;  // sent, forward and backward together
  double fwd() const { return f.total(); }
  double bwd() const { return b.total(); }
};

// Everything of one step on the critical (busiest) pipeline rank, in seconds.
struct StepBreakdown {
  double compute = 0;     // forward, backward and recompute kernels
  double tp = 0, cp = 0;  // exposed TP / CP communication
  double zero = 0;        // exposed per-micro-batch ZeRO 2/3 traffic
  double shared = 0;      // exposed because several dimensions' traffic shares a link
  double slowdown = 0;    // compute slowed by the transfers it overlaps
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
  CommBytes bytes;         // sent per step by this rank
  LinkLoad links;          // seconds per step each link class of this rank is busy (<= step)
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
    double first_zero = 0;             // exposed ZeRO-3 reduce-scatter of the embedding
    LinkLoad first_load, last_load;    // busy seconds per micro-batch
    CommBytes first_bytes, last_bytes;
  };
  Edges EdgeCosts(const Candidate& c) const;
  // Per micro-batch, forward + backward, the busiest pipeline rank: its layers (the chunk costs
  // scaled by its share of the layers, uneven stages included) plus the embedding on the first
  // rank and the head on the last. `per_rank` (may be null) receives every rank's.
  double BusiestStage(const Candidate& c, const ChunkCosts& k, const Edges& x,
                      std::vector<double>* per_rank = nullptr) const;
  // One layer bucket's ZeRO 2/3 traffic over dp x cp: seconds, and bytes each rank sends.
  struct Buckets {
    GroupPath dp;
    double ag = 0, rs = 0;  // gather of the weights, reduce-scatter of the gradient
    double ag_bytes = 0, rs_bytes = 0;
  };
  // What a chunk's first and last buckets add (they have no neighbour to overlap with).
  void ChunkEnds(const Layout& L, const Buckets& z, double layers, ChunkCosts* k) const;
  double Transfer(const Candidate& c) const;  // one pipeline message
  // A data-parallel gather or reduce-scatter of `bytes` over `g` that the ring prices at `ring`
  // seconds: under ZeRO 3, no faster than the calibration's per-rank bound where `g` spans
  // nodes; otherwise `ring`. Callers charge the bounded time to the link like any transfer: it
  // holds the communicator that long.
  double Zero3Transfer(const Layout& L, const GroupPath& g, double ring, double bytes) const;
  // Data-parallel traffic outside the chunks: ZeRO 0/1 reductions during the last backward,
  // ZeRO 1/2 gathers during the next forward, the step's last ZeRO 2 reductions, ZeRO 3's
  // embedding gather. Sets t->dp, adds to t->slowdown, `bytes` and `links`.
  void DataParallel(const Candidate& c, const ChunkCosts& k, StepBreakdown* t, CommBytes* bytes,
                    LinkLoad* links) const;
  // Exposed data-parallel time after the pipeline (t->dp, part of t->slowdown), the optimizer
  // step and the tied-embedding exchange; their bytes and link seconds go to `bytes`, `links`.
  void AfterPipeline(const Candidate& c, const ChunkCosts& k, StepBreakdown* t, CommBytes* bytes,
                     LinkLoad* links) const;
  int64_t MicroBatches(const Candidate& c) const;

  const PlanJob& job_;
  const Hardware& hw_;
  const RankPlacement& placement_;
  PathCache* paths_;
  PipelineModel* pipeline_;
};

}  // namespace loom
