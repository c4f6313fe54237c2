// Chunked vocabulary cross-entropy on the GPU, composed like core/kernels/cross_entropy.h: the
// logits of one vocabulary chunk at a time come from an fp32 cuBLASLt GEMM into `chunk_buf`
// (n * s.chunk floats of device memory), the statistics and gradients from the kernels of
// kernels.h. Same arguments and results as the CPU functions of the same names (device pointers;
// VocabShard as there: a shard of the vocabulary, rows at or beyond vocab_valid are padding and
// excluded). Asynchronous on `stream`; `handle` must not be used concurrently (gemm.h).
#pragma once

#include <cstdint>

#include "core/cuda/gemm.h"
#include "core/cuda/stream.h"
#include "core/kernels/cross_entropy.h"  // VocabShard
#include "core/status.h"

namespace loom::cuda {

// Overwrites max[n], sumexp[n], target_logit[n] with this shard's partial statistics (max = -inf
// and sumexp = 0 when the shard holds no valid row).
Status CrossEntropyStats(GemmHandle& handle, float* max, float* sumexp, float* target_logit,
                         const float* x, const float* wte, const int32_t* targets,
                         const VocabShard& s, float* chunk_buf, Stream stream = nullptr);

// dx[n, C] += dlogits * wte and dwte[rows, C] += dlogits^T * x (either may be null), dlogits =
// dloss_i * (softmax - onehot(target)) recomputed chunk by chunk from lse.
Status CrossEntropyBackward(GemmHandle& handle, float* dx, float* dwte, const float* x,
                            const float* wte, const int32_t* targets, const float* lse,
                            const float* dloss, const VocabShard& s, float* chunk_buf,
                            Stream stream = nullptr);

// bf16 compute (`precision: bf16`), as the CPU's CrossEntropyStatsBf16/BackwardBf16: x [n, C]
// and the shard of wte in bf16 bits, their products accumulated in fp32 (GemmBf16); logits,
// statistics and gradients stay fp32. The backward casts each chunk's dlogits into `chunk16`
// (n * s.chunk bf16) for its two GEMMs. Same results contract as the fp32 functions above.
Status CrossEntropyStatsBf16(GemmHandle& handle, float* max, float* sumexp, float* target_logit,
                             const uint16_t* x, const uint16_t* wte, const int32_t* targets,
                             const VocabShard& s, float* chunk_buf, Stream stream = nullptr);
Status CrossEntropyBackwardBf16(GemmHandle& handle, float* dx, float* dwte, const uint16_t* x,
                                const uint16_t* wte, const int32_t* targets, const float* lse,
                                const float* dloss, const VocabShard& s, float* chunk_buf,
                                uint16_t* chunk16, Stream stream = nullptr);

}  // namespace loom::cuda
