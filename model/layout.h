// The canonical parameters of a model: every tensor's name, global shape, how tensor
// parallelism splits it, its bucket, whether AdamW decays it and its initialisation — the one
// definition the worker, the checkpoint code and the planner share (parallel/param_layout.h holds
// the family-independent layout math they are built with).
//
// GPT-2 (global layer numbers, never stage-local), in storage order:
//   wte [vocab, C]        token embedding, tied with the output projection (vocab-parallel rows,
//                         padded to a multiple of tp)
//   wpe [max_seq, C]      learned positions
//   h.{l}.ln_1.weight/bias [C]             h.{l}.attn.c_attn.weight [3C, C], .bias [3C]
//   h.{l}.attn.c_proj.weight [C, C], .bias  h.{l}.ln_2.weight/bias [C]
//   h.{l}.mlp.c_fc.weight [4C, C], .bias [4C]   h.{l}.mlp.c_proj.weight [C, 4C], .bias [C]
//   ln_f.weight/bias [C]
// Linear weights use nn.Linear's [out, in] layout; c_attn's output columns are q | k | v, split
// per part so a TP rank holds q|k|v of its own heads. Initialisation: normal(0, 0.02) for matrices
// and embeddings, 0.02/sqrt(2*layers) for the residual projections (attn.c_proj, mlp.c_proj),
// zero biases, unit LayerNorm weights.
//
// Llama (no biases, no wpe; RMSNorm weights under the same ln_* names):
//   wte [vocab, C]                          token embedding
//   h.{l}.ln_1.weight [C]                   h.{l}.attn.q.weight [H*hd, C] (query heads)
//   h.{l}.attn.kv.weight [2*KV*hd, C]       k | v of the KV heads, split per part like c_attn
//   h.{l}.attn.c_proj.weight [C, H*hd]      h.{l}.ln_2.weight [C]
//   h.{l}.mlp.c_fc.weight [2F, C]           gate | up (split per part: a TP rank holds its own
//                                           columns of both), F = ffn_hidden
//   h.{l}.mlp.c_proj.weight [C, F]          the down projection
//   ln_f.weight [C]                         lm_head.weight [vocab, C] (untied only)
// attn.q and attn.kv are adjacent, so a rank's local q|k|v rows are one [(Hl + 2 KVl) hd, C]
// matrix in its buffer. When KV < tp (tp a multiple of KV) attn.kv is replicated: each rank
// holds every KV head, uses those its query heads read, and its gradient is summed over the TP
// group (tp_partial_grad). Rotary positions are applied to q and k in the model, not stored.
#pragma once

#include <vector>

#include "model/config.h"
#include "parallel/param_layout.h"

namespace loom {

// GPT-2: the index of each of a layer's parameters, counted from its h.{l}.ln_1.weight, in the
// storage order above (the CPU and GPU models address a layer's tensors by it).
enum GptLayerParam {
  kLn1W,
  kLn1B,
  kQkvW,
  kQkvB,
  kProjW,
  kProjB,
  kLn2W,
  kLn2B,
  kFcW,
  kFcB,
  kFcProjW,
  kFcProjB,
  kNumLayerParams
};

// Llama: the same, counted from h.{l}.ln_1.weight.
enum LlamaLayerParam {
  kLlamaLn1W,
  kLlamaQW,
  kLlamaKvW,
  kLlamaProjW,
  kLlamaLn2W,
  kLlamaFcW,
  kLlamaFcProjW,
  kLlamaNumLayerParams
};

// The parameters of one rank: its tensor-parallel shard of `chunks` (default: the whole model).
// A pure function of the config, the TP size and the chunks.
ParamLayout ModelLayout(const ModelConfig& config, int tp = 1);
ParamLayout ModelLayout(const ModelConfig& config, int tp, const std::vector<ChunkSpec>& chunks);

}  // namespace loom
