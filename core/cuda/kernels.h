// CUDA twins of the CPU kernels of core/kernels/, with the same arguments and the same math, so a
// test can compare them element by element. Contracts shared by every launcher here:
//  - Pointers are device pointers (in and out); shapes are host values.
//  - Work is queued on `stream` (nullptr: the legacy default stream) and the call returns without
//    waiting, except the three marked "synchronous" (kept so for their existing callers). Errors
//    of the launch itself come back at once; faults during execution surface at the next
//    Synchronize (device.h) or blocking copy.
//  - "Overwrites" and "accumulates (+=)" are stated per function and match the CPU kernel.
//  - Not thread-safe for overlapping outputs, as any GPU work; different streams may run
//    launchers concurrently on disjoint outputs.
// Needs no CUDA header (stream.h).
#pragma once

#include <cstdint>

#include "core/cuda/stream.h"
#include "core/kernels/attention.h"  // AttentionShape
#include "core/kernels/embedding.h"  // EmbeddingShape
#include "core/kernels/optimizer.h"  // AdamWParams
#include "core/status.h"

namespace loom::cuda {

// ------------------------------------------------------------------ element-wise (elementwise.h)
// out = GELU(inp), tanh form. Synchronous. out may alias inp.
Status GeluForward(float* out, const float* inp, int64_t n, Stream stream = nullptr);
// The same with the output rounded to bf16 bits (round to nearest even, core/half.h).
Status GeluForwardBf16(uint16_t* out, const float* inp, int64_t n, Stream stream = nullptr);
// dinp = dout * GELU'(inp) (overwrites; dinp may alias dout). Synchronous.
Status GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n,
                    Stream stream = nullptr);
// out = a + b (overwrites; out may alias a or b).
Status ResidualForward(float* out, const float* a, const float* b, int64_t n,
                       Stream stream = nullptr);
// da += dout; db += dout (either may be null).
Status ResidualBackward(float* da, float* db, const float* dout, int64_t n,
                        Stream stream = nullptr);
// Round trip through device memory: host in -> GeluForward on the GPU -> host out. Synchronous;
// for tests (an error names the CUDA call that failed, e.g. "CUDA cudaMalloc: ...").
Status GeluForwardHost(float* out, const float* inp, int64_t n);

// ------------------------------------------------------------------ bf16 casts (bf16.h)
// Element by element as core/half.h: FloatToBf16 (round to nearest even, NaN kept quiet) and
// Bf16ToFloat (exact). Overwrite `out`.
Status CastToBf16(const float* in, uint16_t* out, int64_t n, Stream stream = nullptr);
Status CastFromBf16(const uint16_t* in, float* out, int64_t n, Stream stream = nullptr);

// ------------------------------------------------------------------ optimizer (optimizer.h)
// AdamW in place (param, m, v updated), torch.optim.AdamW's order of operations. Synchronous.
Status AdamWUpdate(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                   float beta1, float beta2, float eps, float weight_decay, int64_t step,
                   Stream stream = nullptr);
// The same taking core/kernels/optimizer.h's parameters; asynchronous.
Status AdamWUpdate(float* param, const float* grad, float* m, float* v, int64_t n,
                   const AdamWParams& p, Stream stream);

// *total += sum of x[i]^2 (x float, total a device double): squares and sums in double, a block
// per stretch of the input, the blocks' sums added with atomicAdd, so the result agrees with
// SumSquares on the CPU to double rounding (the order of the block sums varies from run to run,
// which moves the last bits of the double, not those of a float). Several tensors accumulate into
// one total for the global gradient norm; zero it first (cudaMemsetAsync).
Status SumSquaresAccumulate(double* total, const float* x, int64_t n, Stream stream = nullptr);

// ------------------------------------------------------------------ layernorm (layernorm.h)
// Rows of c channels, biased variance, out = (x - mean) * rstd * weight + bias. Overwrites out and
// (when not null) mean[n] and rstd[n].
Status LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                        const float* bias, int64_t n, int64_t c, float eps = 1e-5f,
                        Stream stream = nullptr);
// The same with `out` rounded to bf16 bits (the GEMM input under `precision: bf16`); mean and rstd
// stay fp32.
Status LayerNormForwardBf16(uint16_t* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int64_t n, int64_t c,
                            float eps = 1e-5f, Stream stream = nullptr);
// Accumulates (+=) into dinp[n, c], dweight[c] and dbias[c] (dweight/dbias may be null), from the
// mean and rstd of the forward. Deterministic: dweight/dbias are column sums over all rows in a
// fixed order (no atomics).
Status LayerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                         const float* inp, const float* weight, const float* mean,
                         const float* rstd, int64_t n, int64_t c, Stream stream = nullptr);

// ------------------------------------------------------------------ embedding (embedding.h)
// out[i,:] = wte[tokens[i] - vocab_begin, :] (tokens outside the shard: zero) + wpe[pos_i, :]
// (wpe null: nothing), pos_i = positions[i] or i % seq when positions is null. Overwrites out.
Status EmbeddingForward(float* out, const int32_t* tokens, const int32_t* positions,
                        const float* wte, const float* wpe, const EmbeddingShape& s,
                        Stream stream = nullptr);
// Accumulates (+=) dout into the rows of dwte (tokens in the shard) and dwpe (either may be
// null). Repeated tokens add through atomicAdd, so the order of the additions (and the last bits
// of the result) may vary between runs.
Status EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                         const int32_t* positions, const EmbeddingShape& s,
                         Stream stream = nullptr);

// ------------------------------------------------------------------ attention (attention.h)
// Causal self-attention, fp32, online softmax over key tiles (the [T, T] scores never exist).
// qkv [B, T, 3C] (q | k | v, head h in columns h*hd .. h*hd+hd-1 of each part), out [B, T, C] and
// lse [B, H, T] overwritten. block_q/block_k of the shape are ignored (the tiles are fixed by the
// kernel). head_dim at most kMaxAttentionHeadDim.
constexpr int64_t kMaxAttentionHeadDim = 256;
Status AttentionForward(float* out, float* lse, const float* qkv, const AttentionShape& s,
                        Stream stream = nullptr);
// dqkv [B, T, 3C] overwritten from dout [B, T, C] and the forward's out and lse. dq is summed over
// key tiles with atomicAdd (last bits vary between runs); dk and dv are summed in shared memory
// with atomicAdd too. Uses no scratch memory.
Status AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* out,
                         const float* lse, const AttentionShape& s, Stream stream = nullptr);

// ------------------------------------------------------------------ cross-entropy pieces
// The steps of core/kernels/cross_entropy.h on one chunk of logits already computed (by a GEMM,
// see cross_entropy.h of this directory for the composed functions). logits is [n, cols] with
// leading dimension ld >= cols; column j is vocabulary id col0 + j; columns j >= valid_cols are
// vocabulary padding and take no part in the softmax.
//
// Sets max = -inf, sumexp = 0, target_logit = 0 for n tokens (before the first chunk).
Status CrossEntropyStatsInit(float* max, float* sumexp, float* target_logit, int64_t n,
                             Stream stream = nullptr);
// Folds one chunk into the running statistics (online softmax): max[i] and sumexp[i] rescaled to
// the new maximum; target_logit[i] = logits[i, targets[i] - col0] when that column is in
// [0, valid_cols).
Status CrossEntropyChunkStats(float* max, float* sumexp, float* target_logit, const float* logits,
                              int64_t ld, int64_t n, int64_t valid_cols, int64_t col0,
                              const int32_t* targets, Stream stream = nullptr);
// lse[i] = max[i] + log(sumexp[i]); loss[i] = lse[i] - target_logit[i] (loss may be null).
Status CrossEntropyFinish(float* lse, float* loss, const float* max, const float* sumexp,
                          const float* target_logit, int64_t n, Stream stream = nullptr);
// In place, logits become dlogits: dloss[i] * (exp(z - lse[i]) - onehot(targets[i] - col0)) for
// columns below valid_cols, 0 for the padding columns [valid_cols, cols).
Status CrossEntropyChunkGrad(float* logits, int64_t ld, int64_t n, int64_t cols, int64_t valid_cols,
                             int64_t col0, const int32_t* targets, const float* lse,
                             const float* dloss, Stream stream = nullptr);

}  // namespace loom::cuda
