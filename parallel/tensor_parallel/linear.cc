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

}  // namespace loom
