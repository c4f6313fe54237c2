// One layer's compute and activation traffic (see the header).
#include "coordinator/planner/layer_model.h"

#include <algorithm>
#include <vector>

#include "coordinator/planner/comm_model.h"
#include "coordinator/planner/memory_model.h"
#include "coordinator/planner/model_math.h"
#include "model/config.h"

namespace loom {
namespace {

// Kernels per layer outside the GEMMs (LayerNorms, GELU, residual adds, softmax), forward.
constexpr double kElementwiseOpsPerLayer = 6;

// Two all-reduces per layer each way (or, with SP, two all-gathers and two reduce-scatters of
// the same tokens), again in a recomputed forward; nothing overlaps them. `gathered`: the bytes
// of an all-gather's output, `reduced`: of a reduction's input (CarriedBytes).
void TensorParallel(PathCache* paths, const Layout& L, double gathered, double reduced, bool full,
                    LayerPasses* p) {
  const GroupPath tp = paths->Ring(1, L.tp);
  const double one =
      L.sp ? AllGather(tp, gathered) + ReduceScatter(tp, reduced) : AllReduce(tp, reduced);
  const double sent =
      L.sp ? RingBytes(L.tp, gathered) + RingBytes(L.tp, reduced) : 2 * RingBytes(L.tp, reduced);
  const double bwd = full ? 4 : 2;
  p->fwd.tp = 2 * one;
  p->bwd.tp = bwd * one;
  p->fwd.load.Add(tp, p->fwd.tp);
  p->bwd.load.Add(tp, p->bwd.tp);
  p->fwd.bytes.tp = 2 * sent;
  p->bwd.bytes.tp = bwd * sent;
}

// Ring attention (worker/gpt.cc): in the forward, K/V block s + 1 travels while block s is
// folded in, so only its excess over that block's attention shows; in the backward the K/V
// still travel ahead, but the dK/dV accumulators are sent after each block's backward and
// waited for at once (cp hops, the last one home). Recompute (full or selective) rebuilds the
// attention core, so the forward ring runs again.
void ContextParallel(PathCache* paths, const Layout& L, double kv, const LayerCosts& x,
                     bool recompute, LayerPasses* p) {
  const GroupPath ring = paths->Hop(L.tp, L.cp);
  const double hop = PointToPoint(ring, kv);
  const double steps = L.cp - 1;
  const double af = x.attn_fwd / L.cp, ab = x.attn_bwd / L.cp;
  LayerPass& f = p->fwd;
  f.cp = steps * std::max(0.0, hop - af);
  f.async += steps * std::min(hop, af);
  f.load.Add(ring, steps * hop);
  f.bytes.cp = steps * kv;
  LayerPass& b = p->bwd;
  b.cp = steps * std::max(0.0, hop - ab) + L.cp * hop;
  b.async += steps * std::min(hop, ab);
  b.load.Add(ring, (steps + L.cp) * hop);
  b.bytes.cp = (steps + L.cp) * kv;
  if (recompute) {
    b.cp += f.cp;
    b.async += steps * std::min(hop, af);
    b.load.Add(ring, steps * hop);
    b.bytes.cp += f.bytes.cp;
  }
}

}  // namespace

LayerCosts LayerCompute(const PlanJob& job, const Hardware& hw, const Layout& L,
                        int64_t micro_batch, Recompute recompute) {
  const ModelConfig& m = job.model;
  const int e = ElementBytes(job.precision);
  const std::vector<GemmShape> g = LayerForwardGemms(m, micro_batch, job.seq, L.tp, L.cp);
  LayerCosts x;
  double linear = 0;
  for (int i : {kQkv, kProj, kFc1, kFc2}) linear += hw.GemmTime(g[static_cast<size_t>(i)], e);
  const double tokens = static_cast<double>(micro_batch * job.seq) / L.cp;
  const double nh = tokens * static_cast<double>(m.hidden);
  const double scores = g[kScores].m * g[kScores].n * g[kScores].count;  // elements
  const double sp_div = (L.sp && L.tp > 1) ? L.tp : 1;
  const double mask = job.dropout ? 1 : 0;
  // Two norms (read, write) and two bias-dropout-residual adds (read two, write one, mask),
  // on 1/tp of the tokens with sequence parallelism; GELU (read, write) or SwiGLU (read two,
  // write one) on the MLP's f/tp-wide intermediate, twice that in the backward. In the compute
  // precision where every tensor is kept in it (Megatron-LM); Loom's executor runs these kernels
  // in fp32 in either precision (ew: CarriedBytes), but under bf16 the GELU's or SwiGLU's output
  // is written in bf16, as the input of the FC projection it is, and it casts for the other
  // GEMMs: both normed activations (read fp32, write bf16) and the attention output, which it
  // keeps in fp32 and casts again in the backward; under ZeRO 3 also the layer's weights, cast
  // at each gather (forward and backward).
  const double f = static_cast<double>(m.ffn());
  const int ew = CarriedBytes(job.precision, job.mixed_precision_activations);
  const bool casts = LoomBf16Casts(job.precision, job.mixed_precision_activations);
  const double norms_adds = nh / sp_div * (2 * 2 * ew + 2 * (3 * ew + mask));
  const double mlp = tokens * f / L.tp;  // elements of the activation's output
  const int mlp_reads = m.llama() ? 2 : 1;
  const double act_fwd = (mlp_reads * ew + (casts ? 2 : ew)) * mlp;
  const double act_bwd = 2 * (mlp_reads + 1) * ew * mlp;
  const double attention_out = tokens * static_cast<double>(m.hidden) / L.tp;
  const double weights = casts && L.zero == 3 ? 6 * LayerParamsPerRank(m, L.tp) : 0;
  const double cast_fwd = casts ? 6 * (2 * nh / sp_div + attention_out) + weights : 0;
  const double cast_bwd = casts ? 6 * attention_out + weights : 0;
  if (hw.type.fused_kernels) {
    const double flops = g[kScores].flops() + g[kContext].flops();
    // At the rate for a rank's own query rows: under context parallelism the kernel folds in
    // blocks of seq / cp rows, which run slower than whole sequences.
    x.attn_fwd = hw.AttentionTime(flops, static_cast<double>(job.seq) / L.cp, g[kScores].k);
    x.attn_bwd = 2 * x.attn_fwd;
  } else {
    // Scaled-masked softmax (read, write) and dropout (read, write, mask) over the scores.
    const double score_bytes = scores * (2 * e + (job.dropout ? 2 * e + 1 : 0));
    x.attn_fwd = hw.GemmTime(g[kScores], e) + hw.GemmTime(g[kContext], e) +
                 hw.MemoryTime(score_bytes) + 2 * hw.op_overhead;
    x.attn_bwd = 2 * (hw.GemmTime(g[kScores], e) + hw.GemmTime(g[kContext], e)) +
                 hw.MemoryTime(2 * score_bytes) + 2 * hw.op_overhead;
  }
  const double overhead = kElementwiseOpsPerLayer * hw.op_overhead;
  x.fwd = linear + x.attn_fwd + hw.MemoryTime(norms_adds + act_fwd + cast_fwd) + overhead;
  x.bwd =
      2 * linear + x.attn_bwd + hw.MemoryTime(2 * norms_adds + act_bwd + cast_bwd) + 2 * overhead;
  if (recompute == Recompute::kFull) x.recompute = x.fwd;
  if (recompute == Recompute::kSelective) x.recompute = x.attn_fwd;
  return x;
}

LayerPasses LayerTraffic(const PlanJob& job, PathCache* paths, const Layout& L, int64_t micro_batch,
                         Recompute recompute, const LayerCosts& x, double layers_per_chunk) {
  const int e = ElementBytes(job.precision);
  const int w = CarriedBytes(job.precision, job.mixed_precision_activations);
  const double tokens = static_cast<double>(micro_batch * job.seq) / L.cp;
  const double nh = tokens * static_cast<double>(job.model.hidden);
  LayerPasses p;
  p.fwd.compute = x.fwd;
  p.bwd.compute = x.bwd + x.recompute;
  if (L.tp > 1) TensorParallel(paths, L, nh * e, nh * w, recompute == Recompute::kFull, &p);
  if (L.cp > 1) {
    // Only the KV heads travel (grouped-query attention: fewer than the query heads).
    ContextParallel(paths, L, 2 * tokens * KvWidthPerRank(job.model, L.tp) * w, x,
                    recompute != Recompute::kNone, &p);
  }
  if (L.pp > 1) {
    // One activation forward and one gradient backward per chunk: they occupy their link (and
    // slow the compute they overlap); the simulator delays the receiver by their transfer time.
    const GroupPath hop = paths->Hop(L.tp * L.cp * L.dp, L.pp);
    const double msg = nh * w / ((L.sp && L.tp > 1) ? L.tp : 1);
    const double per_layer = PointToPoint(hop, msg) / layers_per_chunk;
    for (LayerPass* pass : {&p.fwd, &p.bwd}) {
      pass->load.Add(hop, per_layer);
      pass->async += per_layer;
      pass->bytes.pp = msg / layers_per_chunk;
    }
  }
  return p;
}

}  // namespace loom
