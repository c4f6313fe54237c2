// One transformer layer, one micro-batch, on one rank: its compute op by op, and the transfers of
// the dimensions that move activations (tensor, context and pipeline parallelism), each marked
// as waiting on the critical path or running alongside the compute. ZeRO's parameter and
// gradient buckets are added per chunk by the time model (time_model.h). Pure arithmetic.
#pragma once

#include <cstdint>

#include "coordinator/plan_job.h"
#include "coordinator/planner/hardware.h"
#include "coordinator/planner/overlap_model.h"
#include "coordinator/planner/placement.h"
#include "model/config.h"
#include "parallel/layout.h"

namespace loom {

// Bytes one rank sends, by parallel dimension: (N-1)/N of the buffer per ring all-gather or
// reduce-scatter, twice that per all-reduce, the message per point-to-point send.
struct CommBytes {
  double tp = 0, cp = 0, pp = 0, dp = 0;
  double total() const { return tp + cp + pp + dp; }
  CommBytes& operator+=(const CommBytes& o) {
    tp += o.tp, cp += o.cp, pp += o.pp, dp += o.dp;
    return *this;
  }
  CommBytes Scaled(double k) const { return {tp * k, cp * k, pp * k, dp * k}; }
};

// Bytes each member of a ring of `n` sends for an all-gather or reduce-scatter of `bytes`.
inline double RingBytes(int n, double bytes) {
  return n > 1 ? (n - 1.0) / n * bytes : 0;
}

// Compute of one layer for one micro-batch, seconds.
struct LayerCosts {
  double fwd = 0, bwd = 0, recompute = 0;  // recompute: what the backward rebuilds first
  double attn_fwd = 0, attn_bwd = 0;       // attention core part of fwd / bwd
};

// The four linear layers as GEMMs (backward: two GEMMs of the same size), the attention core as
// two batched GEMMs plus the softmax/dropout traffic over the s x s scores (unfused) or as one
// fused kernel, and the memory-bound element-wise ops as bytes over memory bandwidth.
LayerCosts LayerCompute(const PlanJob& job, const Hardware& hw, const Layout& L,
                        int64_t micro_batch, Recompute recompute);

// One pass (forward, or backward with its recompute) of one layer for one micro-batch.
struct LayerPass {
  double compute = 0;     // kernels
  double tp = 0, cp = 0;  // transfers on the critical path (exposed)
  double own = 0;         // link seconds of the asynchronous ZeRO traffic of this pass
  double async = 0;       // link seconds of every transfer overlapping the compute
  LinkLoad load;          // busy seconds per link class, all traffic
  CommBytes bytes;        // sent
  // The critical path asynchronous traffic can hide behind.
  double window() const { return compute + tp + cp; }
  Exposure Exposed(double slowdown) const {
    return Overlap(window(), compute, own, load, async, slowdown);
  }
};

struct LayerPasses {
  LayerPass fwd, bwd;
};

// The layer's compute and its tensor-parallel collectives (critical path), ring-attention hops
// (K/V ahead of the compute, dK/dV waited for) and its share of the chunk's pipeline sends
// (alongside; their delay to the receiver is the pipeline simulator's). `layers_per_chunk`
// spreads the chunk's two pipeline messages over its layers.
LayerPasses LayerTraffic(const PlanJob& job, PathCache* paths, const Layout& L, int64_t micro_batch,
                         Recompute recompute, const LayerCosts& x, double layers_per_chunk);

}  // namespace loom
