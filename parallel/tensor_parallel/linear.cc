// Column- and row-parallel linear layers over the core kernel.
#include "parallel/tensor_parallel/linear.h"

#include "core/kernels/linear.h"
#include "parallel/tensor_parallel/sequence_parallel.h"

namespace loom {

Status ColumnParallelForward(const TensorParallel& tp, const TokenRows& rows, const float* x_local,
                             float* x_full, const float* w, const float* b, float* y, int64_t in,
                             int64_t out_local) {
  LOOM_RETURN_IF_ERROR(GatherTokens(tp, rows, x_local, x_full, in));
  LinearForward(y, x_full, w, b, rows.full, in, out_local);
  return Status::Ok();
}

Status ColumnParallelBackward(const TensorParallel& tp, const TokenRows& rows, const float* dy,
                              const float* x_full, const float* w, float* dx_full, float* dx_local,
                              float* dw, float* db, int64_t in, int64_t out_local) {
  LinearBackward(dx_full, dw, db, dy, x_full, w, rows.full, in, out_local);
  return ReduceTokens(tp, rows, dx_full, dx_local, in);
}

Status RowParallelForward(const TensorParallel& tp, const TokenRows& rows, const float* x,
                          const float* w, float* partial, float* y_local, int64_t in_local,
                          int64_t out) {
  // Partial sums are reduced across tp before the caller adds the bias and residual once.
  float* products = tp.size() > 1 ? partial : y_local;
  LinearForward<float>(products, x, w, nullptr, rows.full, in_local, out);
  return ReduceTokens(tp, rows, products, y_local, out);
}

Status RowParallelBackward(const TensorParallel& tp, const TokenRows& rows, const float* dy_local,
                           float* dy_full, const float* x, const float* w, float* dx, float* dw,
                           float* db, int64_t in_local, int64_t out) {
  const float* dy = dy_local;
  if (tp.sequence_parallel()) {
    LOOM_RETURN_IF_ERROR(GatherTokens(tp, rows, dy_local, dy_full, out));
    dy = dy_full;
  }
  LinearBackward<float>(dx, dw, nullptr, dy, x, w, rows.full, in_local, out);
  LinearBackward<float>(nullptr, nullptr, db, dy_local, nullptr, nullptr, rows.local, 0, out);
  return Status::Ok();
}

Status ColumnParallelForward(const TensorParallel& tp, const TokenRows& rows, const Bf16* x_local,
                             Bf16* x_full, const Bf16* w, const float* b, float* y, int64_t in,
                             int64_t out_local) {
  LOOM_RETURN_IF_ERROR(GatherTokens(tp, rows, x_local, x_full, in));
  return LinearForwardBf16(y, x_full, w, b, rows.full, in, out_local);
}

Status ColumnParallelBackward(const TensorParallel& tp, const TokenRows& rows, const float* dy,
                              Bf16* dy16, const Bf16* x_full, const Bf16* w, float* dx_full,
                              float* dx_local, float* dw, float* db, int64_t in,
                              int64_t out_local) {
  LOOM_RETURN_IF_ERROR(
      LinearBackwardBf16(dx_full, dw, db, dy, dy16, x_full, w, rows.full, in, out_local));
  return ReduceTokens(tp, rows, dx_full, dx_local, in);
}

Status RowParallelForward(const TensorParallel& tp, const TokenRows& rows, const Bf16* x,
                          const Bf16* w, float* partial, float* y_local, int64_t in_local,
                          int64_t out) {
  float* products = tp.size() > 1 ? partial : y_local;
  LOOM_RETURN_IF_ERROR(LinearForwardBf16(products, x, w, nullptr, rows.full, in_local, out));
  return ReduceTokens(tp, rows, products, y_local, out);
}

Status RowParallelBackward(const TensorParallel& tp, const TokenRows& rows, const float* dy_local,
                           Bf16* dy16, const Bf16* x, const Bf16* w, float* dx, float* dw,
                           float* db, int64_t in_local, int64_t out) {
  // Cast this rank's rows once; with SP gather them (in bf16) into the full rows (the cast rows
  // sit after them: a gather's input must not alias its output).
  Bf16* local16 = tp.sequence_parallel() ? dy16 + rows.full * out : dy16;
  CastToBf16(dy_local, local16, rows.local * out);
  if (tp.sequence_parallel()) LOOM_RETURN_IF_ERROR(GatherTokens(tp, rows, local16, dy16, out));
  LOOM_RETURN_IF_ERROR(
      LinearBackwardBf16Cast(dx, dw, nullptr, nullptr, dy16, x, w, rows.full, in_local, out));
  LinearBackward<float>(nullptr, nullptr, db, dy_local, nullptr, nullptr, rows.local, 0, out);
  return Status::Ok();
}

}  // namespace loom
