// Sizes and work of the GPT model, op by op: parameter counts (whole model and per
// tensor-parallel rank) and the GEMMs of one layer. FLOPs follow Narayanan et al. 2021 (SC'21):
// every GEMM costs 2*M*N*K, attention is counted over the whole s x s square (causal masking is
// not subtracted), and a recomputed forward is counted again. Pure arithmetic, no I/O.
#pragma once

#include <cstdint>
#include <vector>

#include "coordinator/plan_job.h"
#include "model/config.h"

namespace loom {

// Parameters of one transformer layer. GPT-2: 12h^2 + 13h (q|k|v, projection, two MLP matrices,
// their biases and two LayerNorms; f = 4h). Llama: 2h^2 + 2h*kv + 3h*f + 2h (Q, O, K, V with
// grouped-query width kv = kv_heads * head_dim, SwiGLU gate/up/down, two RMSNorms; no biases).
double LayerParams(const ModelConfig& m);
// GPT-2: token and position embeddings (tied with the output projection), V*h + max_seq*h.
// Llama: V*h, twice when the output projection is untied (rotary positions have no table).
double EmbeddingParams(const ModelConfig& m);
double TotalParams(const ModelConfig& m);  // embeddings + layers + final norm
// Key/value columns one tensor-parallel rank holds (each of K and V): its share of the KV heads,
// or one whole head when there are fewer KV heads than ranks (replicated, as Megatron does).
// Also what one rank's K (and V) rows carry around the context-parallel ring.
double KvWidthPerRank(const ModelConfig& m, int tp);
// One tensor-parallel rank's share of a layer: matrices and column-parallel biases split,
// norms and row-parallel biases replicated; Llama's K and V heads split while there are as many
// as ranks, one whole KV head per rank beyond (replicated, as Megatron does).
double LayerParamsPerRank(const ModelConfig& m, int tp);
// The vocabulary-parallel input embedding shard (vocabulary padded to a multiple of tp), plus
// the replicated position table for GPT-2.
double EmbeddingParamsPerRank(const ModelConfig& m, int tp);
// An untied output projection's shard on the last pipeline stage (0 when tied).
double OutputParamsPerRank(const ModelConfig& m, int tp);

// One GEMM shape, `count` times (attention: one per local head and sequence).
struct GemmShape {
  double m = 0, n = 0, k = 0;
  double count = 1;
  double flops() const { return 2 * m * n * k * count; }
};

// The forward GEMMs of one layer on one rank for `micro_batch` sequences of `seq` tokens, with
// the layer split over `tp` tensor-parallel and `cp` context-parallel ranks (a rank holds seq/cp
// query tokens and attends to all seq keys). Indices: kQkv, kScores, kContext, kProj, kFc1, kFc2.
enum LayerGemm { kQkv = 0, kScores, kContext, kProj, kFc1, kFc2, kNumLayerGemms };
std::vector<GemmShape> LayerForwardGemms(const ModelConfig& m, int64_t micro_batch, int64_t seq,
                                         int tp, int cp);
// The logits GEMM of the head (vocabulary shard of one tensor-parallel rank).
GemmShape HeadForwardGemm(const ModelConfig& m, int64_t micro_batch, int64_t seq, int tp, int cp);

// FLOPs of one optimizer step over the whole model (every rank together): forward, backward
// (twice the forward) and the recomputed part of the forward (all of it with full recompute, the
// attention scores and context with selective).
double IterationFlops(const ModelConfig& m, int64_t global_batch, int64_t seq, Recompute r);
// Model FLOPs (no recompute): what MFU counts.
inline double ModelFlops(const ModelConfig& m, int64_t global_batch, int64_t seq) {
  return IterationFlops(m, global_batch, seq, Recompute::kNone);
}
// Narayanan et al.'s closed form for full recompute: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
double MegatronFlops(const ModelConfig& m, int64_t global_batch, int64_t seq);

}  // namespace loom
