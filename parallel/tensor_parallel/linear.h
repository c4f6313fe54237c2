// Megatron's column- and row-parallel linear layers (nn.Linear layout, y = x W^T + b), forward
// and backward over the core linear kernel. Gradients accumulate (+=) into dw and db.
//
// Column-parallel: W is split by output rows, W_r [out_local, in]; every rank computes its output
// columns for all token rows. The input enters through GatherTokens (all-gather of the SP rows)
// and its gradient leaves through ReduceTokens (each rank's partial dx summed).
// Row-parallel: W is split by input columns, W_r [out, in_local]; the input is the column-parallel
// output this rank holds, the partial products are summed with ReduceTokens (reduce-scatter to
// the SP rows). The bias is not added here: it is replicated, and the caller adds it once after
// the reduction (fused with the residual add), so its gradient is taken over the local rows.
//
// Buffers are row-major floats; rows.full = all token rows of the micro-batch, rows.local = those
// of this rank's sequence-parallel region. Scratch buffers may alias as documented per call.
#pragma once

#include <cstdint>

#include "core/kernels/bf16.h"
#include "core/status.h"
#include "parallel/tensor_parallel/context.h"

namespace loom {

// x_full [full, in] = GatherTokens(x_local [local, in]) (kept by the caller for the backward; may
// be x_local itself without SP); y [full, out_local] = x_full W^T + b (b may be null).
Status ColumnParallelForward(const TensorParallel& tp, const TokenRows& rows, const float* x_local,
                             float* x_full, const float* w, const float* b, float* y, int64_t in,
                             int64_t out_local);
// dx_full [full, in] = dy W (overwritten), dw += dy^T x_full, db += rows of dy (db may be null);
// dx_local [local, in] = ReduceTokens(dx_full) (may be dx_full itself with tp = 1).
Status ColumnParallelBackward(const TensorParallel& tp, const TokenRows& rows, const float* dy,
                              const float* x_full, const float* w, float* dx_full, float* dx_local,
                              float* dw, float* db, int64_t in, int64_t out_local);

// partial [full, out] = x [full, in_local] W^T (no bias); y_local [local, out] =
// ReduceTokens(partial). With tp = 1 `partial` is not used and may be null.
Status RowParallelForward(const TensorParallel& tp, const TokenRows& rows, const float* x,
                          const float* w, float* partial, float* y_local, int64_t in_local,
                          int64_t out);
// dy_full [full, out] = GatherTokens(dy_local [local, out]) (only with SP; otherwise dy_local is
// used as it is and dy_full may be null); dx [full, in_local] = dy_full W (overwritten),
// dw += dy_full^T x, db += rows of dy_local (the bias the caller added after the reduction).
Status RowParallelBackward(const TensorParallel& tp, const TokenRows& rows, const float* dy_local,
                           float* dy_full, const float* x, const float* w, float* dx, float* dw,
                           float* db, int64_t in_local, int64_t out);

// bf16 compute (`precision: bf16`, core/kernels/linear.h): the same four calls with the GEMM
// inputs and weights in bf16 and everything else in fp32 (outputs, gradients, and the reductions
// of partial sums across tp). Column-parallel inputs are gathered in bf16; the row-parallel
// backward gathers dy in bf16 too (its fp32 local rows still give db). `dy16` is scratch for
// [full, out_local] (column) or [full + local, out] (row) bf16 elements.
Status ColumnParallelForward(const TensorParallel& tp, const TokenRows& rows, const Bf16* x_local,
                             Bf16* x_full, const Bf16* w, const float* b, float* y, int64_t in,
                             int64_t out_local);
Status ColumnParallelBackward(const TensorParallel& tp, const TokenRows& rows, const float* dy,
                              Bf16* dy16, const Bf16* x_full, const Bf16* w, float* dx_full,
                              float* dx_local, float* dw, float* db, int64_t in, int64_t out_local);
Status RowParallelForward(const TensorParallel& tp, const TokenRows& rows, const Bf16* x,
                          const Bf16* w, float* partial, float* y_local, int64_t in_local,
                          int64_t out);
Status RowParallelBackward(const TensorParallel& tp, const TokenRows& rows, const float* dy_local,
                           Bf16* dy16, const Bf16* x, const Bf16* w, float* dx, float* dw,
                           float* db, int64_t in_local, int64_t out);

}  // namespace loom
