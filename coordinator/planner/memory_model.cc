// Memory model. Activations are counted tensor by tensor (Korthikanti et al. 2022, section 4.1) so
// that the published closed forms come out for 2-byte activations with dropout, and the variants
// (fp32, no dropout, fused attention) follow from the same list.
#include "coordinator/planner/memory_model.h"

#include <algorithm>

#include "coordinator/planner/model_math.h"
#include "model/config.h"

namespace loom {

BytesPerParam ParamBytes(Precision p) {
  if (p == Precision::kBf16) return {2, 2, 12};
  return {4, 4, 8};
}

BytesPerParam StateBytes(Precision p, bool mixed_precision_states) {
  return mixed_precision_states ? ParamBytes(p) : BytesPerParam{4, 4, 8};
}

ModelStates ZeroModelStates(double psi, int nd, int stage, Precision p) {
  const BytesPerParam b = ParamBytes(p);
  ModelStates s{b.weights * psi, b.grads * psi, b.optimizer * psi};
  if (stage >= 1) s.optimizer /= nd;
  if (stage >= 2) s.grads /= nd;
  if (stage >= 3) s.weights /= nd;
  return s;
}

ModelStates LoomModelStates(double psi, int nd, int stage, Precision p) {
  ModelStates s{4 * psi, 4 * psi, 8 * psi};
  if (stage >= 1) s.optimizer /= nd;
  if (stage >= 2) s.grads /= nd;
  if (stage >= 3) s.weights /= nd;
  if (p == Precision::kBf16 && stage < 3) s.weights += 2 * psi;
  return s;
}

namespace {

struct TensorCounts {
  double tokens_h;  // local tokens x hidden: one [tokens, h] tensor has this many elements
  double scores;    // elements of the local attention scores: b * (a/t) * (s/cp) * s
  double t;
};

// Bytes of an element of every kept tensor but the GEMM inputs (ActivationShape::loom_storage).
double RestBytes(const ActivationShape& a) {
  return a.loom_storage ? 4 : a.element_bytes;
}

TensorCounts Counts(const ActivationShape& a) {
  const double tokens = static_cast<double>(a.micro_batch * a.seq) / a.cp;
  const double scores = static_cast<double>(a.micro_batch) * static_cast<double>(a.heads) / a.tp *
                        static_cast<double>(a.seq) / a.cp * static_cast<double>(a.seq);
  return {tokens * static_cast<double>(a.hidden), scores, static_cast<double>(a.tp)};
}

// Every tensor one layer keeps without recompute, split into the parts Korthikanti counts.
struct LayerTensors {
  double replicated;  // LN inputs, QKV and FC1 inputs, dropout masks (split over tp only with SP)
  double sharded;     // Q, K, V, projection input, GELU input, FC2 input (split over tp)
  double scores;      // softmax output, dropout mask and output (unfused attention)
};

LayerTensors Tensors(const ActivationShape& a) {
  const TensorCounts c = Counts(a);
  const double e = a.element_bytes;
  const double e_rest = RestBytes(a);
  LayerTensors x;
  // The two LayerNorms' inputs and outputs (the outputs feed the QKV and FC1 GEMMs).
  x.replicated = (2 * e_rest + 2 * e) * c.tokens_h + (a.dropout ? 2 * c.tokens_h : 0);
  if (a.sp) x.replicated /= c.t;
  // Q, K, V, the projection input, the MLP's intermediates (GELU: its input and output; SwiGLU:
  // gate, up and their product): 12h with GPT-2's shapes.
  const double h = static_cast<double>(a.hidden);
  const double kv = a.kv_width > 0 ? static_cast<double>(a.kv_width) : h;
  const double f = a.ffn > 0 ? static_cast<double>(a.ffn) : 4 * h;
  // K and V: split over tp while there are as many KV heads as ranks, one whole head per rank
  // beyond (replicated).
  const double kv_rank = std::max(kv / c.t, h / static_cast<double>(a.heads));
  // At e_rest: Q, the projection input, K and V, the MLP's first intermediates (GELU's input;
  // SwiGLU's gate and up); at e: the MLP's last (FC2's input).
  const double rest_widths = (2 * h + (a.gated ? 2 : 1) * f) / c.t + 2 * kv_rank;
  x.sharded = c.tokens_h / h * (e_rest * rest_widths + e * f / c.t);
  if (a.fused_attention) {
    // Flash-style attention keeps only the per-row log-sum-exp (fp32).
    x.scores = 4 * c.scores / static_cast<double>(a.seq);
  } else {
    x.scores = (a.dropout ? 2 * e + 1 : e) * c.scores;
  }
  return x;
}

}  // namespace

double LayerActivationBytes(const ActivationShape& a) {
  const LayerTensors x = Tensors(a);
  switch (a.recompute) {
    case Recompute::kFull: {
      const TensorCounts c = Counts(a);
      return RestBytes(a) * c.tokens_h / (a.sp ? c.t : 1);
    }
    case Recompute::kSelective:
      return x.replicated + x.sharded + (a.fused_attention ? x.scores : 0);
    default:
      return x.replicated + x.sharded + x.scores;
  }
}

double LayerWorkingBytes(const ActivationShape& a) {
  const TensorCounts c = Counts(a);
  const double e = RestBytes(a);
  // Gradient buffers: the residual-stream gradient and the widest intermediate (the MLP's, / tp).
  const double h = static_cast<double>(a.hidden);
  const double f = a.ffn > 0 ? static_cast<double>(a.ffn) : 4 * h;
  double working = e * c.tokens_h * (2 + (a.gated ? 2 : 1) * f / h / c.t);
  if (a.recompute == Recompute::kNone) return working;
  const LayerTensors x = Tensors(a);
  if (a.recompute == Recompute::kSelective) return working + x.scores;
  return working + x.replicated + x.sharded + x.scores;
}

MemoryBreakdown StageMemory(const StageMemoryInput& in, int stage, int in_flight) {
  const Layout& L = in.layout;
  const ModelConfig& m = in.model;
  const bool first = stage == 0, last = stage == L.pp - 1;
  double layers = static_cast<double>(m.layers) / L.pp;
  double chunk_layers = layers / L.vpp;  // of the rank's largest chunk
  if (Result<std::vector<int>> split = L.ChunkLayers(m.layers); split.ok() && L.uneven()) {
    layers = 0;
    chunk_layers = 0;
    for (int v = 0; v < L.vpp; ++v) {
      const double n = (*split)[static_cast<size_t>(v * L.pp + stage)];
      layers += n;
      chunk_layers = std::max(chunk_layers, n);
    }
  }
  const double h = static_cast<double>(m.hidden);
  double psi = layers * LayerParamsPerRank(m, L.tp);
  if (first) psi += EmbeddingParamsPerRank(m, L.tp);
  if (last) psi += (m.llama() ? 1 : 2) * h + OutputParamsPerRank(m, L.tp);  // norm (+ head)
  MemoryBreakdown out;
  const ModelStates st = in.mixed_precision_states
                             ? ZeroModelStates(psi, L.dp * L.cp, L.zero, in.precision)
                             : LoomModelStates(psi, L.dp * L.cp, L.zero, in.precision);
  out.weights = st.weights;
  out.grads = st.grads;
  out.optimizer = st.optimizer;
  // Bytes per parameter of the copies and buffers below, in the model states' own layout: Loom's
  // executor keeps fp32 parameters and gradients, and under bf16 a bf16 copy of the weights where
  // they are used.
  const BytesPerParam pb = StateBytes(in.precision, in.mixed_precision_states);
  const double copy16 = LoomBf16Casts(in.precision, in.mixed_precision_states) ? 2 : 0;
  const double wte = static_cast<double>((m.vocab + L.tp - 1) / L.tp) * h;
  if (last && !first && m.tie_embeddings) {
    // The last stage holds a copy of the tied embedding for its head and accumulates the copy's
    // gradient; the first stage owns it (and its optimizer state).
    out.weights += (pb.weights + copy16) * wte;
    out.grads += pb.grads * wte;
  }

  ActivationShape a;
  a.micro_batch = in.micro_batch;
  a.seq = in.seq;
  a.hidden = m.hidden;
  a.heads = m.heads;
  a.tp = L.tp;
  a.cp = L.cp;
  a.sp = L.sp && L.tp > 1;
  a.recompute = in.recompute;
  a.element_bytes = ElementBytes(in.precision);
  a.dropout = in.dropout;
  a.fused_attention = in.fused_kernels;
  a.kv_width = m.kv_width();
  a.ffn = m.ffn();
  a.gated = m.llama();
  a.loom_storage = !in.mixed_precision_activations;
  out.activations = in_flight * chunk_layers * LayerActivationBytes(a) + LayerWorkingBytes(a);

  const double e = a.element_bytes;
  const double tokens = static_cast<double>(in.micro_batch * in.seq) / L.cp;
  const double nh = tokens * h;
  const double sp_div = a.sp ? L.tp : 1;
  if (first && in.dropout) {
    // Embedding dropout mask of every in-flight micro-batch of the first chunk.
    out.edges += std::max(1.0, static_cast<double>(in_flight) / L.vpp) * nh / sp_div;
  }
  if (last) {
    // Final LayerNorm input and head input, then the logits of one micro-batch: materialised in
    // the compute precision plus fp32 for the loss (unfused), or chunked (fused).
    out.edges += 2 * e * nh / sp_div;
    const double vocab_shard = static_cast<double>((m.vocab + L.tp - 1) / L.tp);
    out.edges += in.fused_kernels ? 8 * tokens : tokens * vocab_shard * (e + 4);
    if (in.fused_kernels && !in.mixed_precision_activations) {
      // Loom's chunked loss keeps one chunk of fp32 logits (and under bf16 its gradient in bf16
      // for the head's GEMMs) for the micro-batch's tokens.
      const double rows =
          std::min(static_cast<double>(std::max<int64_t>(in.vocab_chunk, 1)), vocab_shard);
      out.edges += tokens * rows * (e == 2 ? 6 : 4);
    }
  }

  const double w = CarriedBytes(in.precision, in.mixed_precision_activations);
  if (L.tp > 1) out.buffers += (e + w) * nh;         // SP gathers / TP reductions
  if (L.pp > 1) out.buffers += 4 * w * nh / sp_div;  // activation/gradient send + recv
  if (L.cp > 1) {
    // K/V and dK/dV ring blocks, two of each (only the KV heads travel), and with grouped-query
    // attention a per-query-head dK/dV scratch.
    const double kvw = KvWidthPerRank(m, L.tp), qw = h / L.tp;
    out.buffers += w * tokens * (8 * kvw + (kvw < qw ? 2 * qw : 0));
  }
  const double layer_psi = LayerParamsPerRank(m, L.tp);
  if (L.zero == 2) out.buffers += 2 * layer_psi * pb.grads;  // per-bucket gradient buffers
  if (L.zero == 3) {
    out.buffers += 2 * layer_psi * (pb.weights + copy16 + pb.grads);  // gathered layers
  }
  return out;
}

}  // namespace loom
