// The parameter tables of GPT-2 and Llama.
#include "model/layout.h"

#include <cmath>

namespace loom {
namespace {

void AddEmbeddings(const ModelConfig& m, ParamLayoutBuilder& b) {
  const int64_t c = m.hidden;
  b.Add({"wte", {m.vocab, c}, ShardKind::kRows, 1, -1, true, 0.02f, 0, /*pad_rows=*/true});
  if (!m.llama()) b.Add({"wpe", {m.max_seq, c}, ShardKind::kReplicated, 1, -1, true, 0.02f, 0});
  b.CloseBucket();
}

void AddLayer(const ModelConfig& m, int l, ParamLayoutBuilder& b) {
  const int64_t c = m.hidden;
  const float std = 0.02f;
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(m.layers));
  const std::string h = "h." + std::to_string(l) + ".";
  b.Add({h + "ln_1.weight", {c}, ShardKind::kReplicated, 1, l, false, 0, 1});
  b.Add({h + "ln_1.bias", {c}, ShardKind::kReplicated, 1, l, false, 0, 0});
  b.Add({h + "attn.c_attn.weight", {3 * c, c}, ShardKind::kRows, 3, l, true, std, 0});
  b.Add({h + "attn.c_attn.bias", {3 * c}, ShardKind::kRows, 3, l, false, 0, 0});
  b.Add({h + "attn.c_proj.weight", {c, c}, ShardKind::kCols, 1, l, true, proj_std, 0});
  b.Add({h + "attn.c_proj.bias", {c}, ShardKind::kReplicated, 1, l, false, 0, 0});
  b.Add({h + "ln_2.weight", {c}, ShardKind::kReplicated, 1, l, false, 0, 1});
  b.Add({h + "ln_2.bias", {c}, ShardKind::kReplicated, 1, l, false, 0, 0});
  b.Add({h + "mlp.c_fc.weight", {4 * c, c}, ShardKind::kRows, 1, l, true, std, 0});
  b.Add({h + "mlp.c_fc.bias", {4 * c}, ShardKind::kRows, 1, l, false, 0, 0});
  b.Add({h + "mlp.c_proj.weight", {c, 4 * c}, ShardKind::kCols, 1, l, true, proj_std, 0});
  b.Add({h + "mlp.c_proj.bias", {c}, ShardKind::kReplicated, 1, l, false, 0, 0});
  b.CloseBucket();
}

void AddLlamaLayer(const ModelConfig& m, int tp, int l, ParamLayoutBuilder& b) {
  const int64_t c = m.hidden, hd = m.head_dim(), f = m.ffn();
  const float std = 0.02f;
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(m.layers));
  const std::string h = "h." + std::to_string(l) + ".";
  b.Add({h + "ln_1.weight", {c}, ShardKind::kReplicated, 1, l, false, 0, 1});
  b.Add({h + "attn.q.weight", {m.heads * hd, c}, ShardKind::kRows, 1, l, true, std, 0});
  TensorSpec kv{h + "attn.kv.weight", {2 * m.kv() * hd, c}, ShardKind::kRows, 2, l, true, std, 0};
  if (m.kv() % tp != 0) {  // fewer KV heads than tp: every rank holds them all
    kv.shard = ShardKind::kReplicated;
    kv.parts = 1;
    kv.tp_partial_grad = true;
  }
  b.Add(kv);
  b.Add({h + "attn.c_proj.weight", {c, m.heads * hd}, ShardKind::kCols, 1, l, true, proj_std, 0});
  b.Add({h + "ln_2.weight", {c}, ShardKind::kReplicated, 1, l, false, 0, 1});
  b.Add({h + "mlp.c_fc.weight", {2 * f, c}, ShardKind::kRows, 2, l, true, std, 0});
  b.Add({h + "mlp.c_proj.weight", {c, f}, ShardKind::kCols, 1, l, true, proj_std, 0});
  b.CloseBucket();
}

void AddFinalNorm(const ModelConfig& m, ParamLayoutBuilder& b) {
  b.Add({"ln_f.weight", {m.hidden}, ShardKind::kReplicated, 1, -1, false, 0, 1});
  if (!m.llama()) b.Add({"ln_f.bias", {m.hidden}, ShardKind::kReplicated, 1, -1, false, 0, 0});
  if (!m.tie_embeddings) {
    b.Add({"lm_head.weight",
           {m.vocab, m.hidden},
           ShardKind::kRows,
           1,
           -1,
           true,
           0.02f,
           0,
           /*pad_rows=*/true});
  }
  b.CloseBucket();
}

}  // namespace

ParamLayout ModelLayout(const ModelConfig& m, int tp) {
  return ModelLayout(m, tp, {ChunkSpec{0, static_cast<int>(m.layers), true, true}});
}

ParamLayout ModelLayout(const ModelConfig& m, int tp, const std::vector<ChunkSpec>& chunks) {
  ParamLayoutBuilder b(tp, m.vocab);
  for (const ChunkSpec& chunk : chunks) {
    if (chunk.embedding) AddEmbeddings(m, b);
    for (int l = chunk.first_layer; l < chunk.first_layer + chunk.num_layers; ++l)
      m.llama() ? AddLlamaLayer(m, tp, l, b) : AddLayer(m, l, b);
    if (chunk.head) AddFinalNorm(m, b);
  }
  return b.Finish();
}

}  // namespace loom
