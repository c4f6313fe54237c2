// GEMMs on the GPU through cuBLASLt, with the ROW-MAJOR semantics of core/kernels/bf16.h's
// GemmBf16 and core/kernels/blas.h's Gemm:
//   C[m x n] = alpha * op(A) op(B) + beta * C
// op(A) is m x k (A stored k x m when trans_a, leading dimension lda >= its columns), op(B) is
// k x n (stored n x k when trans_b), C has leading dimension ldc >= n. Pointers are device
// pointers. Accumulation is fp32 (CUBLAS_COMPUTE_32F): bf16 products are exact in fp32, so the
// bf16 GEMM differs from an fp32 accumulation of the same bf16 values only by summation order.
// The fp32 GEMM uses full fp32 unless TF32 is allowed on the handle (off by default).
//
// Needs no CUDA header (stream.h and forward declarations).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cuda/stream.h"
#include "core/status.h"

struct cublasLtContext;  // cublasLt.h: typedef struct cublasLtContext* cublasLtHandle_t

namespace loom::cuda {

// A cuBLASLt handle and the workspace its algorithms may use, on the device that was current at
// Create. Movable, not copyable; frees both on destruction.
//
// Thread-safety and streams: the workspace is one buffer, so GEMMs through one handle must not run
// concurrently: use it from one thread and one stream at a time (or one handle per stream).
class GemmHandle {
 public:
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;

  // Internal("cuBLASLt cublasLtCreate: CUBLAS_STATUS_...") or the cudaMalloc error on failure.
  static Result<GemmHandle> Create(size_t workspace_bytes = kDefaultWorkspaceBytes);

  GemmHandle(GemmHandle&& other) noexcept;
  GemmHandle& operator=(GemmHandle&& other) noexcept;
  GemmHandle(const GemmHandle&) = delete;
  GemmHandle& operator=(const GemmHandle&) = delete;
  ~GemmHandle();

  // TF32 tensor cores for the fp32 GEMM (10-bit mantissa products; faster, less exact). Off by
  // default so the fp32 path agrees with the CPU to fp32 rounding.
  void set_allow_tf32(bool allow) { allow_tf32_ = allow; }
  bool allow_tf32() const { return allow_tf32_; }

  cublasLtContext* lt() const { return lt_; }
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  GemmHandle() = default;
  void Reset();

  cublasLtContext* lt_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  bool allow_tf32_ = false;
};

// bf16 A and B (uint16_t bits), fp32 C. beta is 0 (overwrite) or 1 (accumulate), as on the CPU;
// other values are InvalidArgument. k == 0 gives C = beta * C. Asynchronous on `stream`.
Status GemmBf16(GemmHandle& handle, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta,
                float* c, int64_t ldc, Stream stream = nullptr);

// fp32 A, B and C with any alpha and beta (as blas.h's Gemm). Asynchronous on `stream`.
Status GemmF32(GemmHandle& handle, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
               float* c, int64_t ldc, Stream stream = nullptr);

// `batch` GemmF32s in one call: product i reads a + i * stride_a and b + i * stride_b and writes
// c + i * stride_c (strides in elements, >= 0; the products' C blocks must not overlap). For
// matrices that sit side by side in one array, e.g. the heads of attention (stride: head_dim).
Status GemmF32Batched(GemmHandle& handle, bool trans_a, bool trans_b, int64_t m, int64_t n,
                      int64_t k, float alpha, const float* a, int64_t lda, int64_t stride_a,
                      const float* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                      int64_t ldc, int64_t stride_c, int64_t batch, Stream stream = nullptr);

}  // namespace loom::cuda
