// bfloat16 for mixed precision on CPU (the first pieces of `precision: bf16`): conversions and a
// GEMM with bf16 inputs, fp32 accumulation and fp32 output. Debian 12's OpenBLAS is built without
// its bf16 GEMM (cblas_sbgemm is declared but absent), so the GEMM goes through oneDNN's matmul
// primitive (Debian's libdnnl-dev; AVX-512 BF16 kernels where the CPU has them; measured in
// bench/gemm_precision_bench: a step's GEMMs in 0.24-0.39x of fp32 OpenBLAS on this CPU). Built
// without oneDNN, HaveBf16Gemm() is false and GemmBf16 returns Unimplemented.
//
// Thread-safety: every function may be called from any thread; GemmBf16 runs on the OpenMP pool
// (oneDNN's threads are the pool's), so it must not be called from inside a parallel region.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace loom {

// The bits of a bfloat16: the upper half of an IEEE fp32 (core/half.h converts one element).
using Bf16 = uint16_t;

// Arrays, element by element as FloatToBf16 (round to nearest even) and Bf16ToFloat (exact); long
// arrays on the OpenMP pool (called from inside a parallel region, on the calling thread).
void CastToBf16(const float* in, Bf16* out, int64_t n);
void CastFromBf16(const Bf16* in, float* out, int64_t n);

bool HaveBf16Gemm();

// C[m x n] = op(A) op(B) + beta * C, row-major, op(A) m x k (A stored k x m when trans_a, leading
// dimension lda), op(B) k x n (stored n x k when trans_b); products and sums in fp32. beta is 0 or
// 1 (overwrite or accumulate, as gradients need).
Status GemmBf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const Bf16* a,
                int64_t lda, const Bf16* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace loom
