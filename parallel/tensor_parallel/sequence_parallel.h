// Sequence-parallel gather and scatter: how token rows move between the sequence-parallel regions
// (each rank holds TokenRows::local rows) and the tensor-parallel regions (every rank holds all
// TokenRows::full rows), Megatron's g / g-bar pair:
//   GatherTokens  all-gather of the local rows into the full rows (SP); a copy otherwise. The
//                 forward before a column-parallel linear, the backward after a row-parallel one.
//   ReduceTokens  sum of every rank's partial full rows, of which this rank keeps its local rows:
//                 reduce-scatter with SP, all-reduce without, a copy with tp = 1. The forward
//                 after a row-parallel linear, the backward before a column-parallel one.
// Buffers are [rows, width] floats, row-major; `local` and `full` may be the same buffer when no
// rows are split. Blocking (the group's default deadline); not thread-safe per group.
#pragma once

#include <cstdint>

#include "core/kernels/bf16.h"
#include "core/status.h"
#include "parallel/param_layout.h"
#include "parallel/tensor_parallel/context.h"

namespace loom {

Status GatherTokens(const TensorParallel& tp, const TokenRows& rows, const float* local,
                    float* full, int64_t width);
// The same for bf16 rows (`precision: bf16` gathers the GEMM inputs in bf16: half the bytes).
Status GatherTokens(const TensorParallel& tp, const TokenRows& rows, const Bf16* local, Bf16* full,
                    int64_t width);
Status ReduceTokens(const TensorParallel& tp, const TokenRows& rows, float* partial_full,
                    float* local, int64_t width);

// Under SP each rank saw only its token rows in the regions of the replicated parameters
// (LayerNorms, row-parallel biases, positions), so their gradients in `grads` (bucket `bucket`
// of `layout`, bucket-relative) are partial sums: all-reduces them across the tp group, packed
// into one call; so are the tensors marked tp_partial_grad (with or without SP). Nothing to do
// with tp = 1 or when no tensor of the bucket is partial.
Status SumSequenceParallelGrads(const TensorParallel& tp, const ParamLayout& layout, int bucket,
                                float* grads);

}  // namespace loom
