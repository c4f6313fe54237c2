// Row-major GEMM on top of cblas (OpenBLAS), for float and double:
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C
// `Gemm` runs on the calling thread (OpenBLAS is kept single-threaded, see core/threads.h);
// `ParallelGemm` splits the larger of M and N over the OpenMP pool and must not be called from
// inside a parallel region.
#pragma once

#include <cstdint>

namespace loom {

template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

template <typename T>
void ParallelGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                  int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

}  // namespace loom
