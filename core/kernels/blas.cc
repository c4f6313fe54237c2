// cblas wrappers and the row/column split used to run one GEMM on the whole thread pool.
#include "core/kernels/blas.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>

namespace loom {
namespace {

void Cblas(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

void Cblas(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
           int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

// Below this many multiply-adds a split costs more than it gains.
constexpr int64_t kMinParallelWork = 1 << 18;

}  // namespace

template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // cblas leaves C untouched for k == 0 only when beta == 1
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  Cblas(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void ParallelGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                  int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  int threads = omp_get_max_threads();
  if (threads <= 1 || m * n * k < kMinParallelWork) {
    Gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Split the larger output dimension in aligned pieces (multiples of 16 keep SIMD panels whole).
  const bool split_m = m >= n;
  const int64_t extent = split_m ? m : n;
  const int parts = static_cast<int>(std::min<int64_t>(threads, (extent + 15) / 16));
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int p = 0; p < parts; ++p) {
    int64_t per = (extent + parts - 1) / parts;
    per = (per + 15) / 16 * 16;
    int64_t begin = std::min<int64_t>(extent, p * per);
    int64_t end = std::min<int64_t>(extent, begin + per);
    if (begin >= end) continue;
    if (split_m) {
      // Rows of C and of op(A): A is [M,K] (row offset) or, transposed, [K,M] (column offset).
      const T* ap = trans_a ? a + begin : a + begin * lda;
      Gemm(trans_a, trans_b, end - begin, n, k, alpha, ap, lda, b, ldb, beta, c + begin * ldc, ldc);
    } else {
      // Columns of C and of op(B): B is [K,N] (column offset) or, transposed, [N,K] (row offset).
      const T* bp = trans_b ? b + begin * ldb : b + begin;
      Gemm(trans_a, trans_b, m, end - begin, k, alpha, a, lda, bp, ldb, beta, c + begin, ldc);
    }
  }
}

template void Gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void Gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);
template void ParallelGemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*,
                                  int64_t, const float*, int64_t, float, float*, int64_t);
template void ParallelGemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*,
                                   int64_t, const double*, int64_t, double, double*, int64_t);

}  // namespace loom
