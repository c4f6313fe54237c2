// Row-major GEMMs through cuBLASLt. cuBLASLt is column-major; a row-major matrix read as
// column-major is its transpose, so C = op(A) op(B) (row-major) is computed as the column-major
// C^T = op(B)^T op(A)^T: the operands swap places (B first) and keep their transpose flags, and
// m and n swap. Descriptors are made per call (microseconds, next to any GEMM worth the GPU).
#include "core/cuda/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "core/cuda/check.h"

namespace loom::cuda {
namespace {

Status CheckLt(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal(std::string("cuBLASLt ") + what + ": " + cublasLtGetStatusName(st) + " (" +
                  cublasLtGetStatusString(st) + ")");
}

// Owners of the per-call descriptors, destroyed on every return path.
struct MatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  ~MatmulDesc() {
    if (desc != nullptr) (void)cublasLtMatmulDescDestroy(desc);
  }
};
struct Layout {
  cublasLtMatrixLayout_t desc = nullptr;
  ~Layout() {
    if (desc != nullptr) (void)cublasLtMatrixLayoutDestroy(desc);
  }
};
struct Preference {
  cublasLtMatmulPreference_t desc = nullptr;
  ~Preference() {
    if (desc != nullptr) (void)cublasLtMatmulPreferenceDestroy(desc);
  }
};

// The largest power of two (at most 256) dividing the address. cuBLASLt's heuristic assumes
// 256-byte aligned operands unless told otherwise, and a chunk of a matrix (wte + v0 * C) is not.
uint32_t AlignmentOf(const void* p) {
  const auto u = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && u % a != 0) a >>= 1;
  return a;
}

std::string ShapeString(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda,
                        int64_t ldb, int64_t ldc) {
  return std::string(trans_a ? "T" : "N") + (trans_b ? "T" : "N") + " m=" + std::to_string(m) +
         " n=" + std::to_string(n) + " k=" + std::to_string(k) + " lda=" + std::to_string(lda) +
         " ldb=" + std::to_string(ldb) + " ldc=" + std::to_string(ldc);
}

Status CheckArgs(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda,
                 int64_t ldb, int64_t ldc, const char* what) {
  const bool ok = m >= 0 && n >= 0 && k >= 0 && lda >= 1 && ldb >= 1 && ldc >= 1 &&
                  lda >= (trans_a ? m : k) && ldb >= (trans_b ? k : n) && ldc >= n;
  if (ok) return Status::Ok();
  return InvalidArgument(std::string(what) + ": bad shape or leading dimension (" +
                         ShapeString(trans_a, trans_b, m, n, k, lda, ldb, ldc) + ")");
}

// C[m x n] row-major with k == 0: the product is empty, C = beta * C.
Status EmptyProduct(float beta, float* c, int64_t m, int64_t n, int64_t ldc, Stream stream,
                    const char* what) {
  if (beta == 1.0f) return Status::Ok();
  if (beta != 0.0f) {
    return InvalidArgument(std::string(what) + ": k == 0 supports beta 0 or 1 only");
  }
  return internal::Check(
      cudaMemset2DAsync(c, static_cast<size_t>(ldc) * sizeof(float), 0,
                        static_cast<size_t>(n) * sizeof(float), static_cast<size_t>(m), stream),
      "cudaMemset2DAsync (GEMM with k == 0)");
}

// Strided batches (Batched below): how many products, and each operand's stride in elements.
struct Batch {
  int64_t count = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

// Sets a layout's batch count and stride (nothing for a single product).
Status SetBatch(cublasLtMatrixLayout_t layout, int64_t count, int64_t stride) {
  if (count == 1) return Status::Ok();
  const int32_t n = static_cast<int32_t>(count);
  LOOM_RETURN_IF_ERROR(CheckLt(
      cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof(n)),
      "MatrixLayoutSetAttribute BATCH_COUNT"));
  return CheckLt(cublasLtMatrixLayoutSetAttribute(
                     layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
                 "MatrixLayoutSetAttribute STRIDED_BATCH_OFFSET");
}

// The alignment every product of a batch keeps: the base's, capped by the stride's in bytes.
uint32_t BatchAlignment(const void* base, int64_t count, int64_t stride, size_t elem) {
  const uint32_t a = AlignmentOf(base);
  if (count == 1 || stride == 0) return a;
  return std::min(a, AlignmentOf(reinterpret_cast<const void*>(static_cast<uintptr_t>(stride) *
                                                               static_cast<uintptr_t>(elem))));
}

// The row-major GEMM as a column-major cuBLASLt matmul; see the file comment for the mapping.
Status Matmul(GemmHandle& h, cublasComputeType_t compute, cudaDataType_t ab_type, bool trans_a,
              bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
              int64_t lda, const void* b, int64_t ldb, float beta, float* c, int64_t ldc,
              Stream stream, const char* what, const Batch& batch = {}) {
  if (h.lt() == nullptr) return FailedPrecondition(std::string(what) + ": empty GemmHandle");
  const auto u64 = [](int64_t v) { return static_cast<uint64_t>(v); };
  // Column-major problem: C'(n x m) = op'(A' = B) (n x k) * op'(B' = A) (k x m).
  const cublasOperation_t op_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;

  MatmulDesc desc;
  LOOM_RETURN_IF_ERROR(
      CheckLt(cublasLtMatmulDescCreate(&desc.desc, compute, CUDA_R_32F), "MatmulDescCreate"));
  LOOM_RETURN_IF_ERROR(CheckLt(
      cublasLtMatmulDescSetAttribute(desc.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)),
      "MatmulDescSetAttribute TRANSA"));
  LOOM_RETURN_IF_ERROR(CheckLt(
      cublasLtMatmulDescSetAttribute(desc.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
      "MatmulDescSetAttribute TRANSB"));
  // Layouts as stored, column-major: rows x cols with leading dimension.
  Layout la, lb, lc;
  LOOM_RETURN_IF_ERROR(
      CheckLt(cublasLtMatrixLayoutCreate(&la.desc, ab_type, trans_b ? u64(k) : u64(n),
                                         trans_b ? u64(n) : u64(k), ldb),
              "MatrixLayoutCreate A'"));
  LOOM_RETURN_IF_ERROR(
      CheckLt(cublasLtMatrixLayoutCreate(&lb.desc, ab_type, trans_a ? u64(m) : u64(k),
                                         trans_a ? u64(k) : u64(m), lda),
              "MatrixLayoutCreate B'"));
  LOOM_RETURN_IF_ERROR(
      CheckLt(cublasLtMatrixLayoutCreate(&lc.desc, CUDA_R_32F, u64(n), u64(m), ldc),
              "MatrixLayoutCreate C"));
  LOOM_RETURN_IF_ERROR(SetBatch(la.desc, batch.count, batch.stride_b));  // A' is B
  LOOM_RETURN_IF_ERROR(SetBatch(lb.desc, batch.count, batch.stride_a));
  LOOM_RETURN_IF_ERROR(SetBatch(lc.desc, batch.count, batch.stride_c));

  Preference pref;
  LOOM_RETURN_IF_ERROR(CheckLt(cublasLtMatmulPreferenceCreate(&pref.desc), "PreferenceCreate"));
  const uint64_t ws = h.workspace_bytes();
  LOOM_RETURN_IF_ERROR(
      CheckLt(cublasLtMatmulPreferenceSetAttribute(
                  pref.desc, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
              "PreferenceSetAttribute MAX_WORKSPACE_BYTES"));
  const size_t ab_bytes = ab_type == CUDA_R_32F ? 4 : 2;
  const uint32_t c_align = BatchAlignment(c, batch.count, batch.stride_c, 4);
  const uint32_t align[4] = {BatchAlignment(b, batch.count, batch.stride_b, ab_bytes),
                             BatchAlignment(a, batch.count, batch.stride_a, ab_bytes), c_align,
                             c_align};
  const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    LOOM_RETURN_IF_ERROR(CheckLt(
        cublasLtMatmulPreferenceSetAttribute(pref.desc, align_attr[i], &align[i], sizeof(align[i])),
        "PreferenceSetAttribute MIN_ALIGNMENT"));
  }

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  LOOM_RETURN_IF_ERROR_CTX(
      CheckLt(cublasLtMatmulAlgoGetHeuristic(h.lt(), desc.desc, la.desc, lb.desc, lc.desc, lc.desc,
                                             pref.desc, 1, &result, &found),
              "MatmulAlgoGetHeuristic"),
      std::string(what) + " " + ShapeString(trans_a, trans_b, m, n, k, lda, ldb, ldc));
  if (found == 0) {
    return Internal(std::string(what) + ": cuBLASLt has no algorithm for " +
                    ShapeString(trans_a, trans_b, m, n, k, lda, ldb, ldc));
  }
  LOOM_RETURN_IF_ERROR_CTX(
      CheckLt(cublasLtMatmul(h.lt(), desc.desc, &alpha, b, la.desc, a, lb.desc, &beta, c, lc.desc,
                             c, lc.desc, &result.algo, h.workspace(), h.workspace_bytes(), stream),
              "Matmul"),
      std::string(what) + " " + ShapeString(trans_a, trans_b, m, n, k, lda, ldb, ldc));
  return Status::Ok();
}

// The fp32 products of GemmF32 and GemmF32Batched, arguments checked: TF32 where the handle allows
// it; with k == 0 every product's C becomes beta * C.
Status F32Products(GemmHandle& handle, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                   float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                   float beta, float* c, int64_t ldc, Stream stream, const char* what,
                   const Batch& batch) {
  if (m == 0 || n == 0 || batch.count == 0) return Status::Ok();
  if (k == 0) {
    for (int64_t i = 0; i < batch.count; ++i) {
      LOOM_RETURN_IF_ERROR(EmptyProduct(beta, c + i * batch.stride_c, m, n, ldc, stream, what));
    }
    return Status::Ok();
  }
  const cublasComputeType_t compute =
      handle.allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  return Matmul(handle, compute, CUDA_R_32F, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
                c, ldc, stream, what, batch);
}

}  // namespace

Result<GemmHandle> GemmHandle::Create(size_t workspace_bytes) {
  GemmHandle h;  // frees whatever was made if a later step fails
  LOOM_RETURN_IF_ERROR(CheckLt(cublasLtCreate(&h.lt_), "cublasLtCreate"));
  if (workspace_bytes > 0) {
    LOOM_RETURN_IF_ERROR(internal::Check(cudaMalloc(&h.workspace_, workspace_bytes),
                                         "cudaMalloc (cuBLASLt workspace)"));
    h.workspace_bytes_ = workspace_bytes;
  }
  return h;
}

GemmHandle::GemmHandle(GemmHandle&& other) noexcept
    : lt_(std::exchange(other.lt_, nullptr)),
      workspace_(std::exchange(other.workspace_, nullptr)),
      workspace_bytes_(std::exchange(other.workspace_bytes_, 0)),
      allow_tf32_(other.allow_tf32_) {}

GemmHandle& GemmHandle::operator=(GemmHandle&& other) noexcept {
  if (this != &other) {
    Reset();
    lt_ = std::exchange(other.lt_, nullptr);
    workspace_ = std::exchange(other.workspace_, nullptr);
    workspace_bytes_ = std::exchange(other.workspace_bytes_, 0);
    allow_tf32_ = other.allow_tf32_;
  }
  return *this;
}

GemmHandle::~GemmHandle() {
  Reset();
}

// cudaFree waits for the device, so a GEMM still running on the workspace finishes first.
// Errors here have nowhere to go (a destructor); the handle is gone either way.
void GemmHandle::Reset() {
  if (workspace_ != nullptr) (void)cudaFree(workspace_);
  if (lt_ != nullptr) (void)cublasLtDestroy(lt_);
  workspace_ = nullptr;
  lt_ = nullptr;
  workspace_bytes_ = 0;
}

Status GemmBf16(GemmHandle& handle, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta,
                float* c, int64_t ldc, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckArgs(trans_a, trans_b, m, n, k, lda, ldb, ldc, "GemmBf16"));
  if (beta != 0.0f && beta != 1.0f) {
    return InvalidArgument("GemmBf16: beta must be 0 or 1, got " + std::to_string(beta));
  }
  if (m == 0 || n == 0) return Status::Ok();
  if (k == 0) return EmptyProduct(beta, c, m, n, ldc, stream, "GemmBf16");
  return Matmul(handle, CUBLAS_COMPUTE_32F, CUDA_R_16BF, trans_a, trans_b, m, n, k, 1.0f, a, lda, b,
                ldb, beta, c, ldc, stream, "GemmBf16");
}

Status GemmF32Batched(GemmHandle& handle, bool trans_a, bool trans_b, int64_t m, int64_t n,
                      int64_t k, float alpha, const float* a, int64_t lda, int64_t stride_a,
                      const float* b, int64_t ldb, int64_t stride_b, float beta, float* c,
                      int64_t ldc, int64_t stride_c, int64_t batch, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckArgs(trans_a, trans_b, m, n, k, lda, ldb, ldc, "GemmF32Batched"));
  if (batch < 0 || batch > INT32_MAX || stride_a < 0 || stride_b < 0 || stride_c < 0) {
    return InvalidArgument("GemmF32Batched: bad batch " + std::to_string(batch) +
                           " or negative stride");
  }
  return F32Products(handle, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream,
                     "GemmF32Batched", Batch{batch, stride_a, stride_b, stride_c});
}

Status GemmF32(GemmHandle& handle, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
               float* c, int64_t ldc, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckArgs(trans_a, trans_b, m, n, k, lda, ldb, ldc, "GemmF32"));
  return F32Products(handle, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream,
                     "GemmF32", Batch{});
}

}  // namespace loom::cuda
