// Parameter and FLOP counts of the GPT model.
#include "coordinator/planner/model_math.h"

#include <algorithm>

#include "model/config.h"

namespace loom {

double KvWidthPerRank(const ModelConfig& m, int tp) {
  const double kv_heads = std::max(1.0, static_cast<double>(m.kv()) / tp);
  return kv_heads * static_cast<double>(m.head_dim());
}

double LayerParams(const ModelConfig& m) {
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn());
  if (m.llama()) {
    // Q and O (h x h), K and V (h x kv), gate, up and down (h x f), two RMSNorm weights.
    return 2 * h * h + 2 * h * static_cast<double>(m.kv_width()) + 3 * h * f + 2 * h;
  }
  return 4 * h * h + 2 * h * f + 9 * h + f;  // 12h^2 + 13h at f = 4h
}

double EmbeddingParams(const ModelConfig& m) {
  const double h = static_cast<double>(m.hidden), v = static_cast<double>(m.vocab);
  if (m.llama()) return (m.tie_embeddings ? 1 : 2) * v * h;  // rotary positions: no table
  return (v + static_cast<double>(m.max_seq)) * h;
}

double TotalParams(const ModelConfig& m) {
  const double norm = (m.llama() ? 1.0 : 2.0) * static_cast<double>(m.hidden);
  return EmbeddingParams(m) + static_cast<double>(m.layers) * LayerParams(m) + norm;
}

double LayerParamsPerRank(const ModelConfig& m, int tp) {
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.ffn());
  if (m.llama()) {
    return (2 * h * h + 3 * h * f) / tp + 2 * h * KvWidthPerRank(m, tp) + 2 * h;
  }
  // Matrices and column-parallel biases split, LayerNorms and row-parallel biases replicated.
  return (4 * h * h + 2 * h * f + 3 * h + f) / tp + 6 * h;  // (12h^2 + 7h)/tp + 6h at f = 4h
}

double EmbeddingParamsPerRank(const ModelConfig& m, int tp) {
  const int64_t padded = (m.vocab + tp - 1) / tp * tp;
  const double shard = static_cast<double>(padded / tp) * static_cast<double>(m.hidden);
  if (m.llama()) return shard;  // the input embedding; an untied head is OutputParamsPerRank
  return shard + static_cast<double>(m.max_seq) * static_cast<double>(m.hidden);
}

double OutputParamsPerRank(const ModelConfig& m, int tp) {
  if (m.tie_embeddings) return 0;
  const int64_t padded = (m.vocab + tp - 1) / tp * tp;
  return static_cast<double>(padded / tp) * static_cast<double>(m.hidden);
}

std::vector<GemmShape> LayerForwardGemms(const ModelConfig& m, int64_t micro_batch, int64_t seq,
                                         int tp, int cp) {
  const double h = static_cast<double>(m.hidden), t = tp;
  const double tokens = static_cast<double>(micro_batch * seq) / cp;  // local query tokens
  const double q = static_cast<double>(seq) / cp;                     // local queries per sequence
  const double s = static_cast<double>(seq);
  const double d = static_cast<double>(m.head_dim());
  const double heads = static_cast<double>(m.heads) / t * static_cast<double>(micro_batch);
  std::vector<GemmShape> g(kNumLayerGemms);
  const double f = static_cast<double>(m.ffn());
  g[kQkv] = {tokens, h / t + 2 * KvWidthPerRank(m, tp), h, 1};
  g[kScores] = {q, s, d, heads};   // Q K^T (grouped-query: as many as query heads)
  g[kContext] = {q, d, s, heads};  // softmax(QK^T) V
  g[kProj] = {tokens, h, h / t, 1};
  g[kFc1] = {tokens, (m.llama() ? 2 : 1) * f / t, h, 1};  // SwiGLU: gate and up
  g[kFc2] = {tokens, h, f / t, 1};
  return g;
}

GemmShape HeadForwardGemm(const ModelConfig& m, int64_t micro_batch, int64_t seq, int tp, int cp) {
  const double tokens = static_cast<double>(micro_batch * seq) / cp;
  const double padded = static_cast<double>((m.vocab + tp - 1) / tp * tp);
  return {tokens, padded / tp, static_cast<double>(m.hidden), 1};
}

double IterationFlops(const ModelConfig& m, int64_t global_batch, int64_t seq, Recompute r) {
  // Whole model on one "rank": tp = cp = 1, the batch as one micro-batch. The padded vocabulary
  // equals the true one for tp = 1.
  std::vector<GemmShape> g = LayerForwardGemms(m, global_batch, seq, 1, 1);
  double layer_fwd = 0;
  for (const GemmShape& x : g) layer_fwd += x.flops();
  double recompute = 0;
  if (r == Recompute::kFull) recompute = layer_fwd;
  if (r == Recompute::kSelective) recompute = g[kScores].flops() + g[kContext].flops();
  const double head_fwd = HeadForwardGemm(m, global_batch, seq, 1, 1).flops();
  return static_cast<double>(m.layers) * (3 * layer_fwd + recompute) + 3 * head_fwd;
}

double MegatronFlops(const ModelConfig& m, int64_t global_batch, int64_t seq) {
  const double b = static_cast<double>(global_batch), s = static_cast<double>(seq);
  const double l = static_cast<double>(m.layers), h = static_cast<double>(m.hidden);
  const double v = static_cast<double>(m.vocab);
  return 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
}

}  // namespace loom
