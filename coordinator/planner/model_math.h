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

// Parameters of one transformer layer: 12h^2 + 13h (q|k|v, projection, two MLP matrices, their
// biases and two LayerNorms).
double LayerParams(const ModelConfig& m);
// Token and position embeddings (tied with the output projection): V*h + max_seq*h.
double EmbeddingParams(const ModelConfig& m);
double TotalParams(const ModelConfig& m);  // embeddings + layers + final LayerNorm
// One tensor-parallel rank's share of a layer: matrices and column-parallel biases split,
// LayerNorms and row-parallel biases replicated: (12h^2 + 7h)/tp + 6h.
double LayerParamsPerRank(const ModelConfig& m, int tp);
// The vocabulary-parallel embedding shard (vocabulary padded to a multiple of tp) plus the
// replicated position table.
double EmbeddingParamsPerRank(const ModelConfig& m, int tp);

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
