// Step-time model: chunk costs from the per-layer model (layer_model.h) plus ZeRO's buckets, the
// first and last stages' embedding and head, the pipeline simulation, and what the data-parallel
// reductions and gathers add after it.
#include "coordinator/planner/time_model.h"

#include <algorithm>
#include <cstdio>

#include "coordinator/planner/model_math.h"
#include "model/config.h"

namespace loom {
namespace {

// Adam step bytes per owned parameter besides the gradient read: fp32 master, m and v read and
// written (24), the working copy written (<= 4).
constexpr double kOptimizerBytesPerParam = 28;

}  // namespace

std::string Candidate::ToString() const {
  char buf[200];
  std::snprintf(buf, sizeof(buf), "tp=%d cp=%d pp=%d vpp=%d dp=%d zero=%d sp=%s mb=%lld rc=%s %s",
                layout.tp, layout.cp, layout.pp, layout.vpp, layout.dp, layout.zero,
                layout.sp ? "on" : "off", static_cast<long long>(micro_batch),
                RecomputeName(recompute), ScheduleKindName(schedule));
  std::string s = buf;
  if (layout.uneven()) {
    s += " stages=" + std::to_string(layout.first_stage_layers) + "|..|" +
         std::to_string(layout.last_stage_layers);
  }
  return s;
}

TimeModel::TimeModel(const PlanJob& job, const Hardware& hw, const RankPlacement& placement,
                     PathCache* paths, PipelineModel* pipeline)
    : job_(job), hw_(hw), placement_(placement), paths_(paths), pipeline_(pipeline) {}

int64_t TimeModel::MicroBatches(const Candidate& c) const {
  return job_.global_batch / (static_cast<int64_t>(c.layout.dp) * c.micro_batch);
}

namespace {

// Adds `count` layers of `p`, with their exposure, to one direction of a chunk.
void AddLayers(const LayerPass& p, double count, double slowdown, PassCosts* d, CommBytes* bytes) {
  const Exposure ex = p.Exposed(slowdown);
  d->compute += count * p.compute;
  d->tp += count * p.tp;
  d->cp += count * p.cp;
  d->zero += count * ex.own;
  d->shared += count * ex.shared;
  d->slow += count * ex.slowdown;
  d->load += p.load.Scaled(count);
  *bytes += p.bytes.Scaled(count);
}

// The bytes per parameter that data-parallel transfers move (PlanJob::grad_comm_bytes and
// param_comm_bytes): the stored sizes of ParamBytes are the memory's, not the wire's.
BytesPerParam DpCommBytes(const PlanJob& job) {
  BytesPerParam b = ParamBytes(job.precision);
  if (job.precision == Precision::kFp32) return b;
  constexpr double kLoom = 4;  // fp32 gradients and parameters on the wire
  b.grads = job.grad_comm_bytes > 0 ? job.grad_comm_bytes : kLoom;
  b.weights = job.param_comm_bytes > 0 ? job.param_comm_bytes : kLoom;
  return b;
}

}  // namespace

ChunkCosts TimeModel::Chunk(const Candidate& c) const {
  const Layout& L = c.layout;
  const double layers = static_cast<double>(job_.model.layers) / (L.pp * L.vpp);  // >= 1
  const double slowdown = hw_.overlap_slowdown;
  const LayerCosts x = LayerCompute(job_, hw_, L, c.micro_batch, c.recompute);
  const LayerPasses plain = LayerTraffic(job_, paths_, L, c.micro_batch, c.recompute, x, layers);
  const int nd = L.dp * L.cp;
  Buckets z;
  z.dp = paths_->Ring(L.tp, nd);
  if (nd > 1 && L.zero >= 2) {
    const BytesPerParam pb = DpCommBytes(job_);
    const double psi = LayerParamsPerRank(job_.model, L.tp);
    z.rs = Zero3Transfer(L, z.dp, ReduceScatter(z.dp, psi * pb.grads), psi * pb.grads);
    z.rs_bytes = RingBytes(nd, psi * pb.grads);
    if (L.zero == 3) {
      z.ag = Zero3Transfer(L, z.dp, AllGather(z.dp, psi * pb.weights), psi * pb.weights);
      z.ag_bytes = RingBytes(nd, psi * pb.weights);
    }
  }
  // Layers that prefetch the next bucket (all but the chunk's last in each direction) carry it
  // alongside their compute: forward the next gather, backward the next gather plus the
  // previous layer's reduce-scatter (they queue on one communicator). Without overlap the
  // reduce-scatter is waited for at once (the gathers are still prefetched).
  LayerPasses zero = plain;
  zero.fwd.own = z.ag;
  zero.bwd.own = z.ag + (job_.overlap ? z.rs : 0);
  for (LayerPass* p : {&zero.fwd, &zero.bwd}) {
    p->async += p->own;
    p->load.Add(z.dp, p->own);
  }
  ChunkCosts k;
  AddLayers(zero.fwd, layers - 1, slowdown, &k.f, &k.bytes);
  AddLayers(plain.fwd, 1, slowdown, &k.f, &k.bytes);
  AddLayers(zero.bwd, layers - 1, slowdown, &k.b, &k.bytes);
  AddLayers(plain.bwd, 1, slowdown, &k.b, &k.bytes);
  // Every layer's bucket is gathered each way and its gradient reduce-scattered.
  k.bytes.dp = layers * (2 * z.ag_bytes + z.rs_bytes);
  ChunkEnds(L, z, layers, &k);
  return k;
}

void TimeModel::ChunkEnds(const Layout& L, const Buckets& z, double layers, ChunkCosts* k) const {
  if (L.zero == 3) {
    // The chunk's first layer waits for its whole gather (nothing was prefetched) in the forward
    // and in the backward, and its last reduce-scatter delays the next gather.
    k->f.zero += z.ag;
    k->b.zero += z.ag + z.rs;
    k->f.load.Add(z.dp, z.ag);
    k->b.load.Add(z.dp, z.ag + z.rs);
  } else if (L.zero == 2 && job_.overlap) {
    // The chunk's last reduce-scatter is waited for only by the same bucket's next micro-batch:
    // it runs while the rank executes other chunks, one forward and one backward (in the steady
    // state of every schedule) before the next chunk's last reduce-scatter queues behind it. So
    // it hides behind a whole chunk's forward and backward, sharing their links and slowing their
    // compute; what the link cannot carry in that time shows. (The step's very last one is
    // exposed after the pipeline.)
    LinkLoad load = k->f.load;
    load += k->b.load;
    load.Add(z.dp, z.rs);
    const Exposure ex = Overlap(k->fwd() + k->bwd(), k->f.compute + k->b.compute, z.rs, load, z.rs,
                                hw_.overlap_slowdown);
    k->f.zero += ex.own;
    k->f.shared += ex.shared;
    k->f.slow += ex.slowdown;
    k->f.load.Add(z.dp, z.rs);
  }
  if (!job_.overlap && L.zero >= 2) {
    // Every reduce-scatter waited for as soon as it is issued (ZeRO 3's last one is above).
    const double waited = (L.zero == 2 ? layers : layers - 1) * z.rs;
    k->b.zero += waited;
    k->b.load.Add(z.dp, waited);
  }
}

TimeModel::Edges TimeModel::EdgeCosts(const Candidate& c) const {
  const Layout& L = c.layout;
  const ModelConfig& m = job_.model;
  const int e = ElementBytes(job_.precision);
  const double tokens = static_cast<double>(c.micro_batch * job_.seq) / L.cp;
  const double nh = tokens * static_cast<double>(m.hidden);
  const double sp_div = (L.sp && L.tp > 1) ? L.tp : 1;
  Edges x;
  // Embedding: gather rows of wte and wpe and add (forward), scatter-add (backward).
  // Loom's executor keeps the embedding and the final LayerNorm in fp32 in either precision, and
  // under bf16 casts the final LayerNorm's output (its full rows, after the SP gather) for the
  // head's GEMMs, forward and backward, and there too the tied embedding's copy on a last stage
  // that does not own it.
  const int ew = CarriedBytes(job_.precision, job_.mixed_precision_activations);
  const bool casts = LoomBf16Casts(job_.precision, job_.mixed_precision_activations);
  const double tied_copy =
      L.pp > 1 && m.tie_embeddings
          ? static_cast<double>((m.vocab + L.tp - 1) / L.tp) * static_cast<double>(m.hidden)
          : 0;
  const double head_casts = casts ? 2 * 6 * (nh + tied_copy) : 0;
  x.first = hw_.MemoryTime(3 * ew * nh) + hw_.MemoryTime(3 * ew * nh) + 2 * hw_.op_overhead;
  // Head: final LayerNorm, logits GEMM (backward: two GEMMs, plus recomputing the logits when
  // the loss is chunked), softmax cross-entropy over the vocabulary shard.
  const GemmShape head = HeadForwardGemm(m, c.micro_batch, job_.seq, L.tp, L.cp);
  const double gemm = hw_.GemmTime(head, e);
  const double logits = head.m * head.n;
  x.last = hw_.MemoryTime(12 * ew * nh / sp_div + head_casts) +
           gemm * (hw_.type.fused_kernels ? 4 : 3) + hw_.MemoryTime(2 * logits * (e + 8)) +
           4 * hw_.op_overhead;
  if (L.tp > 1) {
    const GroupPath tp = paths_->Ring(1, L.tp);
    // Vocabulary-parallel embedding: partial lookups summed; loss: max and sum-exp all-reduced;
    // head backward: the input gradient summed over the vocabulary shards. Under sequence
    // parallelism the sums are reduce-scatters, and the full rows are gathered where they are
    // needed: the final norm's output for the head (forward), the embedding's output gradient for
    // its lookup (backward); in fp32 under Loom's bf16 as the sums (CarriedBytes).
    const double summed = nh * ew;
    const double sum_and_gather =
        L.sp ? ReduceScatter(tp, summed) + AllGather(tp, summed) : AllReduce(tp, summed);
    x.first_tp = sum_and_gather;
    x.last_tp = 2 * AllReduce(tp, 4 * tokens) + sum_and_gather;
    x.first_load.Add(tp, x.first_tp);
    x.last_load.Add(tp, x.last_tp);
    x.first_bytes.tp = 2 * RingBytes(L.tp, summed);
    x.last_bytes.tp = 2 * 2 * RingBytes(L.tp, 4 * tokens) + x.first_bytes.tp;
  }
  const int nd = L.dp * L.cp;
  if (nd > 1 && L.zero >= 2) {
    // The embedding bucket stays gathered for the whole step, but its gradient is
    // reduce-scattered after every micro-batch's backward; under ZeRO 3 the next gather queues
    // behind it.
    const GroupPath dp = paths_->Ring(L.tp, nd);
    const double grads = EmbeddingParamsPerRank(m, L.tp) * DpCommBytes(job_).grads;
    const double rs = Zero3Transfer(L, dp, ReduceScatter(dp, grads), grads);
    if (L.zero == 3 || !job_.overlap) x.first_zero = rs;
    x.first_load.Add(dp, rs);
    x.first_bytes.dp = RingBytes(nd, grads);
  }
  return x;
}

double TimeModel::Zero3Transfer(const Layout& L, const GroupPath& g, double ring,
                                double bytes) const {
  if (L.zero != 3 || hw_.zero3_rank_bandwidth <= 0 || g.nodes <= 1) return ring;
  return std::max(ring, RingBytes(g.size, bytes) / hw_.zero3_rank_bandwidth);
}

double TimeModel::Transfer(const Candidate& c) const {
  const Layout& L = c.layout;
  if (L.pp <= 1) return 0;
  const double tokens = static_cast<double>(c.micro_batch * job_.seq) / L.cp;
  const double sp_div = (L.sp && L.tp > 1) ? L.tp : 1;
  const double bytes = tokens * static_cast<double>(job_.model.hidden) *
                       CarriedBytes(job_.precision, job_.mixed_precision_activations) / sp_div;
  return PointToPoint(paths_->Hop(L.tp * L.cp * L.dp, L.pp), bytes);
}

void TimeModel::DataParallel(const Candidate& c, const ChunkCosts& k, StepBreakdown* t,
                             CommBytes* bytes, LinkLoad* links) const {
  const Layout& L = c.layout;
  const int nd = L.dp * L.cp;
  if (nd <= 1) return;
  const BytesPerParam pb = DpCommBytes(job_);
  // The first stage is the largest (it holds the embedding): its buckets are one per layer plus
  // the embedding's, reduced last in the backward and gathered first in the forward.
  const int buckets = static_cast<int>(job_.model.layers / L.pp);
  const double layer = LayerParamsPerRank(job_.model, L.tp);
  // (An untied output projection: on the last stage, as large as the input embedding; with one
  // stage both are the same rank's.)
  const double emb = EmbeddingParamsPerRank(job_.model, L.tp) +
                     (L.pp == 1 ? OutputParamsPerRank(job_.model, L.tp) : 0);
  const GroupPath dp = paths_->Ring(L.tp, nd);
  const LinkClass cls = ClassOf(dp);
  // A serial chain of per-layer transfers plus the embedding's within a window of the rank's
  // compute (the last micro-batch's backward for reductions, the next step's first forward for
  // gathers), less what other dimensions keep the same link busy with meanwhile: the link time
  // that shows, and the compute slowed by the part that overlaps (if the link does not already
  // extend the window by more).
  auto chain = [&](double each, double first_or_last, const PassCosts& window) {
    const double total = buckets * each + first_or_last;
    const double wall = L.vpp * window.total();
    const double free = std::max(0.0, wall - L.vpp * window.load.busy[cls]);
    const double exposed =
        job_.overlap ? first_or_last + SerialChainExposed(buckets, each, free) : total;
    const double slowed =
        each + first_or_last + hw_.overlap_slowdown * std::min(total - exposed, wall);
    t->dp += exposed;
    t->slowdown += std::max(0.0, slowed - exposed);
    links->busy[cls] += total;
  };
  const double grads = buckets * layer * pb.grads + emb * pb.grads;
  const double weights = buckets * layer * pb.weights + emb * pb.weights;
  if (L.zero == 0) {
    chain(AllReduce(dp, layer * pb.grads), AllReduce(dp, emb * pb.grads), k.b);
    bytes->dp += 2 * RingBytes(nd, grads);
  } else if (L.zero == 1) {
    chain(ReduceScatter(dp, layer * pb.grads), ReduceScatter(dp, emb * pb.grads), k.b);
    bytes->dp += RingBytes(nd, grads);
  } else if (L.zero == 2 && job_.overlap) {
    // Per-micro-batch reduce-scatters are in the chunks; the step's last layer bucket and the
    // embedding's are waited for before the optimizer.
    t->dp += ReduceScatter(dp, layer * pb.grads) + ReduceScatter(dp, emb * pb.grads);
  }
  if (L.zero == 1 || L.zero == 2) {
    // The updated parameters are gathered while the next step's forward needs them.
    chain(AllGather(dp, layer * pb.weights), AllGather(dp, emb * pb.weights), k.f);
    bytes->dp += RingBytes(nd, weights);
  } else if (L.zero == 3) {
    // The embedding bucket is gathered once per step, by the first forward, unprefetched.
    const double ag = Zero3Transfer(L, dp, AllGather(dp, emb * pb.weights), emb * pb.weights);
    t->dp += ag;
    links->busy[cls] += ag;
    bytes->dp += RingBytes(nd, emb * pb.weights);
  }
}

void TimeModel::AfterPipeline(const Candidate& c, const ChunkCosts& k, StepBreakdown* t,
                              CommBytes* bytes, LinkLoad* links) const {
  const Layout& L = c.layout;
  const BytesPerParam pb = StateBytes(job_.precision, job_.mixed_precision_states);
  const ModelConfig& m = job_.model;
  t->dp = 0;
  DataParallel(c, k, t, bytes, links);
  const double psi = static_cast<double>(m.layers / L.pp) * LayerParamsPerRank(m, L.tp) +
                     EmbeddingParamsPerRank(m, L.tp) +
                     (L.pp == 1 ? OutputParamsPerRank(m, L.tp) : 0);
  const double owned = L.zero >= 1 ? psi / (L.dp * L.cp) : psi;
  const double optimizer_bytes = owned * (kOptimizerBytesPerParam + 2 * pb.grads);
  // Loom under bf16: the bf16 weight copies are made again after each update (read fp32, write
  // bf16; under ZeRO 3 with each gather instead, left out).
  const double copies = LoomBf16Casts(job_.precision, job_.mixed_precision_states) && L.zero < 3
                            ? hw_.MemoryTime(6 * psi)
                            : 0;
  t->optimizer = copies +
                 (hw_.optimizer_bandwidth > 0 ? optimizer_bytes / hw_.optimizer_bandwidth
                                              : hw_.MemoryTime(optimizer_bytes)) +
                 4 * hw_.op_overhead;
  t->pp = 0;
  if (L.pp > 1 && m.tie_embeddings) {
    // Tied embedding: the first stage sends wte at the start (needed by the last stage's first
    // forward, pp - 1 forwards later) and receives its gradient after the last stage's last
    // backward (needed pp - 1 backwards later).
    const GroupPath emb = paths_->Hop(L.tp * L.cp * L.dp * (L.pp - 1), 2);
    const double wte =
        static_cast<double>((m.vocab + L.tp - 1) / L.tp) * static_cast<double>(m.hidden);
    const double send = PointToPoint(emb, wte * pb.weights);
    const double back = PointToPoint(emb, wte * pb.grads);
    t->pp = std::max(0.0, send - (L.pp - 1) * k.fwd()) + std::max(0.0, back - (L.pp - 1) * k.bwd());
    links->Add(emb, send + back);
    bytes->pp += wte * (pb.weights + pb.grads);
  }
}

double TimeModel::BusiestStage(const Candidate& c, const ChunkCosts& k, const Edges& x,
                               std::vector<double>* per_rank) const {
  const Layout& L = c.layout;
  const double first = x.first + x.first_tp + x.first_zero, last = x.last + x.last_tp;
  const int64_t chunks = int64_t{L.pp} * L.vpp;
  // Chunk(c) prices a chunk of the average size; a chunk's cost is proportional to its layers.
  const double avg = static_cast<double>(job_.model.layers) / static_cast<double>(chunks);
  const double per_layer = (k.fwd() + k.bwd()) / avg;
  Result<std::vector<int>> split = L.ChunkLayers(job_.model.layers);
  double busiest = 0;
  for (int r = 0; r < L.pp; ++r) {
    double layers = 0;
    for (int v = 0; v < L.vpp; ++v) {
      layers += split.ok() ? (*split)[static_cast<size_t>(v * L.pp + r)] : avg;
    }
    double cost = layers * per_layer;
    if (r == 0) cost += first;
    if (r == L.pp - 1) cost += last;
    if (per_rank != nullptr) per_rank->push_back(cost);
    busiest = std::max(busiest, cost);
  }
  return busiest;
}

double TimeModel::LowerBound(const Candidate& c) const {
  const ChunkCosts k = Chunk(c);
  const Edges x = EdgeCosts(c);
  const double m = static_cast<double>(MicroBatches(c));
  StepBreakdown t;
  CommBytes bytes;
  LinkLoad links;
  AfterPipeline(c, k, &t, &bytes, &links);
  return m * BusiestStage(c, k, x) + t.dp + t.slowdown + t.optimizer + t.pp;
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
  in.mixed_precision_states = job_.mixed_precision_states;
  in.mixed_precision_activations = job_.mixed_precision_activations;
  in.vocab_chunk = job_.vocab_chunk;
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
  const bool both = L.pp == 1;
  const bool last = x.last + x.last_tp >= x.first + x.first_tp + x.first_zero;
  const double edge_compute = both ? x.first + x.last : (last ? x.last : x.first);
  const double edge_tp = both ? x.first_tp + x.last_tp : (last ? x.last_tp : x.first_tp);
  const double edge_zero = both || !last ? x.first_zero : 0;
  LinkLoad edge_load = both ? x.first_load : (last ? x.last_load : x.first_load);
  CommBytes edge_bytes = both ? x.first_bytes : (last ? x.last_bytes : x.first_bytes);
  if (both) edge_load += x.last_load, edge_bytes += x.last_bytes;
  StepBreakdown& t = p.time;
  const double chunks = m * L.vpp;
  t.compute = chunks * (k.f.compute + k.b.compute) + m * edge_compute;
  t.tp = chunks * (k.f.tp + k.b.tp) + m * edge_tp;
  t.cp = chunks * (k.f.cp + k.b.cp);
  t.zero = chunks * (k.f.zero + k.b.zero) + m * edge_zero;
  t.shared = chunks * (k.f.shared + k.b.shared);
  t.slowdown = chunks * (k.f.slow + k.b.slow);
  // Uneven stages (or an edge's share): the busiest rank's work beyond a uniform chunk plus the
  // busier edge, which the uniform simulation above does not see, paces every micro-batch. Even
  // stages make it 0; a lighter first or last stage makes it negative.
  const double uniform = L.vpp * (k.fwd() + k.bwd()) + edge_compute + edge_tp + edge_zero;
  const double uneven = BusiestStage(c, k, x) - uniform;
  t.compute += m * uneven;
  const double pipe = est.step_time + m * (edge_compute + edge_tp + edge_zero + uneven);
  t.bubble = std::max(0.0, pipe - (t.compute + t.tp + t.cp + t.zero + t.shared + t.slowdown));
  p.bytes = k.bytes.Scaled(chunks);
  p.bytes += edge_bytes.Scaled(m);
  p.links = k.f.load;
  p.links += k.b.load;
  p.links = p.links.Scaled(chunks);
  p.links += edge_load.Scaled(m);
  const double slowed_in_pipeline = t.slowdown;
  AfterPipeline(c, k, &t, &p.bytes, &p.links);  // adds its own slowdown
  t.step = pipe + t.dp + (t.slowdown - slowed_in_pipeline) + t.optimizer + t.pp;
  // No link carries more than a step's worth of traffic, whatever the windows above allowed
  // (transfers may also run in the bubble, so this bound is the whole step).
  const double over = p.links.Max() - t.step;
  if (over > 0) t.shared += over, t.step += over;
  const double world = L.world();
  p.tokens_per_s = static_cast<double>(job_.global_batch * job_.seq) / t.step;
  p.tflops_per_device = IterationFlops(job_.model, job_.global_batch, job_.seq, c.recompute) /
                        (t.step * world) / 1e12;
  p.mfu = ModelFlops(job_.model, job_.global_batch, job_.seq) / (t.step * world * hw_.peak);
  return p;
}

}  // namespace loom
