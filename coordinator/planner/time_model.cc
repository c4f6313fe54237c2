// Step-time model. Per layer and micro-batch, op by op: the four linear layers as GEMMs (backward:
// two GEMMs of the same size), the attention core as two batched GEMMs plus the softmax/dropout
// traffic over the s x s scores (unfused) or as one fused kernel, and the memory-bound
// element-wise ops (LayerNorms, GELU, bias-dropout-residual) as bytes over memory bandwidth.
#include "coordinator/planner/time_model.h"

#include <algorithm>
#include <cstdio>

#include "coordinator/planner/model_math.h"

namespace loom {
namespace {

// Kernels per layer outside the GEMMs (LayerNorms, GELU, residual adds, softmax), forward.
constexpr double kElementwiseOpsPerLayer = 6;
// Adam step bytes per owned parameter besides the gradient read: fp32 master, m and v read and
// written (24), the working copy written (<= 4).
constexpr double kOptimizerBytesPerParam = 28;

struct LayerCosts {
  double fwd = 0, bwd = 0, recompute = 0;  // compute, seconds per micro-batch
  double attn_fwd = 0, attn_bwd = 0;       // attention core part of fwd / bwd
};

}  // namespace

std::string Candidate::ToString() const {
  char buf[200];
  std::snprintf(buf, sizeof(buf), "tp=%d cp=%d pp=%d vpp=%d dp=%d zero=%d sp=%s mb=%lld rc=%s %s",
                layout.tp, layout.cp, layout.pp, layout.vpp, layout.dp, layout.zero,
                layout.sp ? "on" : "off", static_cast<long long>(micro_batch),
                RecomputeModeName(recompute), ScheduleKindName(schedule));
  return buf;
}

TimeModel::TimeModel(const PlanJob& job, const Hardware& hw, const RankPlacement& placement,
                     PathCache* paths, PipelineModel* pipeline)
    : job_(job), hw_(hw), placement_(placement), paths_(paths), pipeline_(pipeline) {}

int64_t TimeModel::MicroBatches(const Candidate& c) const {
  return job_.global_batch / (static_cast<int64_t>(c.layout.dp) * c.micro_batch);
}

namespace {

LayerCosts LayerCompute(const PlanJob& job, const Hardware& hw, const Candidate& c) {
  const Layout& L = c.layout;
  const ModelShape& m = job.model;
  const int e = ElementBytes(job.precision);
  const std::vector<GemmShape> g = LayerForwardGemms(m, c.micro_batch, job.seq, L.tp, L.cp);
  LayerCosts x;
  double linear = 0;
  for (int i : {kQkv, kProj, kFc1, kFc2}) linear += hw.GemmTime(g[static_cast<size_t>(i)], e);
  const double tokens = static_cast<double>(c.micro_batch * job.seq) / L.cp;
  const double nh = tokens * static_cast<double>(m.hidden);
  const double scores = g[kScores].m * g[kScores].n * g[kScores].count;  // elements
  const double sp_div = (L.sp && L.tp > 1) ? L.tp : 1;
  const double mask = job.dropout ? 1 : 0;
  // Two LayerNorms (read, write) and two bias-dropout-residual adds (read two, write one, mask),
  // on 1/tp of the tokens with sequence parallelism; GELU on the 4h/tp-wide FC1 output.
  double elementwise = nh / sp_div * (2 * 2 * e + 2 * (3 * e + mask)) + 2 * e * 4 * nh / L.tp;
  if (hw.type.fused_kernels) {
    const double flops = g[kScores].flops() + g[kContext].flops();
    x.attn_fwd = hw.AttentionTime(flops, static_cast<double>(job.seq), g[kScores].k);
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
  x.fwd = linear + x.attn_fwd + hw.MemoryTime(elementwise) + overhead;
  x.bwd = 2 * linear + x.attn_bwd + hw.MemoryTime(2 * elementwise) + 2 * overhead;
  if (c.recompute == RecomputeMode::kFull) x.recompute = x.fwd;
  if (c.recompute == RecomputeMode::kSelective) x.recompute = x.attn_fwd;
  return x;
}

}  // namespace

ChunkCosts TimeModel::Chunk(const Candidate& c) const {
  const Layout& L = c.layout;
  const ModelShape& m = job_.model;
  const int e = ElementBytes(job_.precision);
  const BytesPerParam pb = ParamBytes(job_.precision);
  const LayerCosts x = LayerCompute(job_, hw_, c);
  const double tokens = static_cast<double>(c.micro_batch * job_.seq) / L.cp;
  const double nh = tokens * static_cast<double>(m.hidden);
  const bool full = c.recompute == RecomputeMode::kFull;

  ChunkCosts k;
  k.compute_fwd = x.fwd;
  k.compute_bwd = x.bwd + x.recompute;
  if (L.tp > 1) {
    // Two all-reduces per layer each way (or, with SP, two all-gathers and two reduce-scatters of
    // the same volume), again in a recomputed forward; nothing overlaps them.
    const GroupPath tp = paths_->Ring(1, L.tp);
    const double one =
        L.sp ? AllGather(tp, nh * e) + ReduceScatter(tp, nh * e) : AllReduce(tp, nh * e);
    k.tp_fwd = 2 * one;
    k.tp_bwd = 2 * one + (full ? 2 * one : 0);
  }
  if (L.cp > 1) {
    // Ring attention: cp - 1 K/V blocks arrive while the previous block is folded in; backward
    // moves K/V and dK/dV, plus the last hop of dK/dV home.
    const GroupPath ring = paths_->Hop(L.tp, L.cp);
    const double kv = 2 * nh / L.tp * e;
    const double fwd_step = std::max(0.0, PointToPoint(ring, kv) - x.attn_fwd / L.cp);
    const double bwd_step = std::max(0.0, PointToPoint(ring, 2 * kv) - x.attn_bwd / L.cp);
    k.cp_fwd = (L.cp - 1) * fwd_step;
    k.cp_bwd = (L.cp - 1) * bwd_step + PointToPoint(ring, kv) + (full ? k.cp_fwd : 0);
  }
  const int nd = L.dp * L.cp;
  if (nd > 1 && L.zero >= 2) {
    const GroupPath dp = paths_->Ring(L.tp, nd);
    const double psi = LayerParamsPerRank(m, L.tp);
    const double rs = ReduceScatter(dp, psi * pb.grads);
    if (L.zero == 3) {
      // Each layer is gathered before its forward and its backward (the next one prefetched
      // while this one computes); its gradient is reduce-scattered after its backward.
      const double ag = AllGather(dp, psi * pb.weights);
      k.zero_fwd = job_.overlap ? std::max(0.0, ag - x.fwd) : ag;
      k.zero_bwd = job_.overlap ? std::max(0.0, ag + rs - k.compute_bwd) : ag + rs;
    } else {
      k.zero_bwd = job_.overlap ? std::max(0.0, rs - k.compute_bwd) : rs;
    }
  }
  const double layers = static_cast<double>(m.layers) / (L.pp * L.vpp);
  k.compute_fwd *= layers;
  k.compute_bwd *= layers;
  k.tp_fwd *= layers;
  k.tp_bwd *= layers;
  k.cp_fwd *= layers;
  k.cp_bwd *= layers;
  k.zero_fwd *= layers;
  k.zero_bwd *= layers;
  return k;
}

TimeModel::Edges TimeModel::EdgeCosts(const Candidate& c) const {
  const Layout& L = c.layout;
  const ModelShape& m = job_.model;
  const int e = ElementBytes(job_.precision);
  const double tokens = static_cast<double>(c.micro_batch * job_.seq) / L.cp;
  const double nh = tokens * static_cast<double>(m.hidden);
  const double sp_div = (L.sp && L.tp > 1) ? L.tp : 1;
  Edges x;
  // Embedding: gather rows of wte and wpe and add (forward), scatter-add (backward).
  x.first = hw_.MemoryTime(3 * e * nh) + hw_.MemoryTime(3 * e * nh) + 2 * hw_.op_overhead;
  // Head: final LayerNorm, logits GEMM (backward: two GEMMs, plus recomputing the logits when
  // the loss is chunked), softmax cross-entropy over the vocabulary shard.
  const GemmShape head = HeadForwardGemm(m, c.micro_batch, job_.seq, L.tp, L.cp);
  const double gemm = hw_.GemmTime(head, e);
  const double logits = head.m * head.n;
  x.last = hw_.MemoryTime(12 * e * nh / sp_div) + gemm * (hw_.type.fused_kernels ? 4 : 3) +
           hw_.MemoryTime(2 * logits * (e + 8)) + 4 * hw_.op_overhead;
  if (L.tp > 1) {
    const GroupPath tp = paths_->Ring(1, L.tp);
    // Vocabulary-parallel embedding: partial lookups summed; loss: max and sum-exp all-reduced;
    // head backward: the input gradient summed over the vocabulary shards.
    x.first_tp = L.sp ? ReduceScatter(tp, nh * e) : AllReduce(tp, nh * e);
    x.last_tp =
        2 * AllReduce(tp, 4 * tokens) + (L.sp ? ReduceScatter(tp, nh * e) : AllReduce(tp, nh * e));
  }
  return x;
}

double TimeModel::Transfer(const Candidate& c) const {
  const Layout& L = c.layout;
  if (L.pp <= 1) return 0;
  const double tokens = static_cast<double>(c.micro_batch * job_.seq) / L.cp;
  const double sp_div = (L.sp && L.tp > 1) ? L.tp : 1;
  const double bytes =
      tokens * static_cast<double>(job_.model.hidden) * ElementBytes(job_.precision) / sp_div;
  return PointToPoint(paths_->Hop(L.tp * L.cp * L.dp, L.pp), bytes);
}

double TimeModel::StageParams(const Candidate& c) const {
  const Layout& L = c.layout;
  const double layers = static_cast<double>(job_.model.layers) / L.pp;
  const double body = layers * LayerParamsPerRank(job_.model, L.tp);
  return body + EmbeddingParamsPerRank(job_.model, L.tp);  // the first stage is the largest
}

void TimeModel::AfterPipeline(const Candidate& c, const ChunkCosts& k, StepBreakdown* t) const {
  const Layout& L = c.layout;
  const BytesPerParam pb = ParamBytes(job_.precision);
  const double psi = StageParams(c);
  const int nd = L.dp * L.cp;
  const double buckets = static_cast<double>(job_.model.layers) / L.pp + 1;
  const double window_b = L.vpp * k.bwd();  // last micro-batch's backward on this rank
  const double window_f = L.vpp * k.fwd();  // first micro-batch's forward of the next step
  const bool overlap = job_.overlap;
  auto hidden = [&](double total, double window) {
    return overlap ? std::max(total / buckets, total - window) : total;
  };
  t->dp = 0;
  if (nd > 1) {
    const GroupPath dp = paths_->Ring(L.tp, nd);
    const double grads = psi * pb.grads, weights = psi * pb.weights;
    const double layer_psi = LayerParamsPerRank(job_.model, L.tp);
    switch (L.zero) {
      case 0:
        t->dp = hidden(AllReduce(dp, grads), window_b);
        break;
      case 1:
        t->dp =
            hidden(ReduceScatter(dp, grads), window_b) + hidden(AllGather(dp, weights), window_f);
        break;
      case 2:
        t->dp = ReduceScatter(dp, grads) / buckets + hidden(AllGather(dp, weights), window_f);
        break;
      default:
        t->dp = AllGather(dp, layer_psi * pb.weights) + ReduceScatter(dp, layer_psi * pb.grads);
    }
  }
  const double owned = L.zero >= 1 ? psi / nd : psi;
  t->optimizer =
      hw_.MemoryTime(owned * (kOptimizerBytesPerParam + 2 * pb.grads)) + 4 * hw_.op_overhead;
  t->pp = 0;
  if (L.pp > 1) {
    // Tied embedding: the first stage sends wte at the start (needed by the last stage's first
    // forward, pp - 1 forwards later) and receives its gradient after the last stage's last
    // backward (needed pp - 1 backwards later).
    const GroupPath emb = paths_->Hop(L.tp * L.cp * L.dp * (L.pp - 1), 2);
    const double wte = static_cast<double>((job_.model.vocab + L.tp - 1) / L.tp) *
                       static_cast<double>(job_.model.hidden);
    t->pp = std::max(0.0, PointToPoint(emb, wte * pb.weights) - (L.pp - 1) * k.fwd()) +
            std::max(0.0, PointToPoint(emb, wte * pb.grads) - (L.pp - 1) * k.bwd());
  }
}

double TimeModel::LowerBound(const Candidate& c) const {
  const ChunkCosts k = Chunk(c);
  const Edges x = EdgeCosts(c);
  const double m = static_cast<double>(MicroBatches(c));
  const double edge = c.layout.pp == 1 ? x.first + x.last + x.first_tp + x.last_tp
                                       : std::max(x.first + x.first_tp, x.last + x.last_tp);
  StepBreakdown t;
  AfterPipeline(c, k, &t);
  return m * (c.layout.vpp * (k.fwd() + k.bwd()) + edge) + t.dp + t.optimizer + t.pp;
}

Result<Prediction> TimeModel::Memory(const Candidate& c) {
  const Layout& L = c.layout;
  const int64_t m = MicroBatches(c);
  Prediction p;
  p.candidate = c;
  p.micro_batches = m;
  // In-flight counts depend only on the instruction order, and saturate after the warm-up.
  std::vector<int> in_flight(static_cast<size_t>(L.pp), static_cast<int>(m * L.vpp));
  if (c.schedule != ScheduleKind::kGPipe) {
    const int64_t sim_m = std::min<int64_t>(m, 4 * static_cast<int64_t>(L.pp));
    LOOM_ASSIGN_OR_RETURN(
        PipelineEstimate est,
        pipeline_->Estimate(c.schedule, L.pp, L.vpp, static_cast<int>(sim_m), 1.0, 2.0, 0.0));
    in_flight = est.peak_in_flight;
  }
  StageMemoryInput in;
  in.model = job_.model;
  in.seq = job_.seq;
  in.micro_batch = c.micro_batch;
  in.layout = L;
  in.recompute = c.recompute;
  in.precision = job_.precision;
  in.dropout = job_.dropout;
  in.fused_kernels = hw_.type.fused_kernels;
  p.stage_memory.resize(static_cast<size_t>(L.pp));
  for (int r = 0; r < L.pp; ++r) {
    p.stage_memory[static_cast<size_t>(r)] = StageMemory(in, r, in_flight[static_cast<size_t>(r)]);
    const double total = p.stage_memory[static_cast<size_t>(r)].total();
    if (total > p.peak_memory) p.peak_memory = total, p.peak_stage = r;
  }
  p.capacity = hw_.memory * (1 - job_.headroom);
  return p;
}

Result<Prediction> TimeModel::Predict(const Candidate& c) {
  LOOM_ASSIGN_OR_RETURN(Prediction p, Memory(c));
  const Layout& L = c.layout;
  const ChunkCosts k = Chunk(c);
  const Edges x = EdgeCosts(c);
  const double m = static_cast<double>(p.micro_batches);
  LOOM_ASSIGN_OR_RETURN(PipelineEstimate est, pipeline_->Estimate(c.schedule, L.pp, L.vpp,
                                                                  static_cast<int>(p.micro_batches),
                                                                  k.fwd(), k.bwd(), Transfer(c)));
  // The simulator prices uniform chunks; the first and last stages also run the embedding and
  // the head. The busiest of them sets the pace, so its extra work adds once per micro-batch.
  double edge_compute = x.first + x.last, edge_tp = x.first_tp + x.last_tp;
  if (L.pp > 1) {
    const bool last = x.last + x.last_tp >= x.first + x.first_tp;
    edge_compute = last ? x.last : x.first;
    edge_tp = last ? x.last_tp : x.first_tp;
  }
  StepBreakdown& t = p.time;
  const double chunks = m * L.vpp;
  t.compute = chunks * (k.compute_fwd + k.compute_bwd) + m * edge_compute;
  t.tp = chunks * (k.tp_fwd + k.tp_bwd) + m * edge_tp;
  t.cp = chunks * (k.cp_fwd + k.cp_bwd);
  t.zero = chunks * (k.zero_fwd + k.zero_bwd);
  const double pipe = est.step_time + m * (edge_compute + edge_tp);
  t.bubble = std::max(0.0, pipe - (t.compute + t.tp + t.cp + t.zero));
  AfterPipeline(c, k, &t);
  t.step = pipe + t.dp + t.optimizer + t.pp;

  const double world = L.world();
  p.tokens_per_s = static_cast<double>(job_.global_batch * job_.seq) / t.step;
  p.tflops_per_device = IterationFlops(job_.model, job_.global_batch, job_.seq, c.recompute) /
                        (t.step * world) / 1e12;
  p.mfu = ModelFlops(job_.model, job_.global_batch, job_.seq) / (t.step * world * hw_.peak);
  return p;
}

}  // namespace loom
