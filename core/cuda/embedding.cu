// Token + position embedding: one thread per output element (forward) or per gradient element
// (backward, scattered with atomicAdd since tokens and positions repeat).
#include <cuda_runtime.h>

#include <string>

#include "core/cuda/check.h"
#include "core/cuda/kernels.h"

namespace loom::cuda {
namespace {

// ---------------------------------------------------------------- kernels
__device__ __forceinline__ int64_t PositionOf(const int32_t* positions, int64_t i, int64_t seq) {
  return positions != nullptr ? positions[i] : i % seq;
}

__global__ void embedding_forward_kernel(float* out, const int32_t* tokens,
                                         const int32_t* positions, const float* wte,
                                         const float* wpe, int64_t n, int64_t seq, int64_t c,
                                         int64_t vocab_begin, int64_t vocab_rows) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= n * c) return;
  const int64_t i = e / c, j = e - i * c;
  const int64_t row = tokens[i] - vocab_begin;
  const bool local = row >= 0 && row < vocab_rows;
  // The same three cases as the CPU kernel (a sum only when both terms exist), so the result is
  // bit-identical, signed zeros included.
  if (wpe != nullptr) {
    const float p = wpe[PositionOf(positions, i, seq) * c + j];
    out[e] = local ? wte[row * c + j] + p : p;
  } else {
    out[e] = local ? wte[row * c + j] : 0.0f;
  }
}

__global__ void embedding_backward_kernel(float* dwte, float* dwpe, const float* dout,
                                          const int32_t* tokens, const int32_t* positions,
                                          int64_t n, int64_t seq, int64_t c, int64_t vocab_begin,
                                          int64_t vocab_rows) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= n * c) return;
  const int64_t i = e / c, j = e - i * c;
  const float g = dout[e];
  const int64_t row = tokens[i] - vocab_begin;
  if (dwte != nullptr && row >= 0 && row < vocab_rows) atomicAdd(dwte + row * c + j, g);
  if (dwpe != nullptr) atomicAdd(dwpe + PositionOf(positions, i, seq) * c + j, g);
}

// ---------------------------------------------------------------- launchers
Status CheckShape(const EmbeddingShape& s, bool have_positions, const char* what) {
  if (s.n < 0 || s.channels <= 0 || s.vocab_rows < 0 || (!have_positions && s.seq <= 0)) {
    return InvalidArgument(std::string(what) + ": bad shape n=" + std::to_string(s.n) +
                           " channels=" + std::to_string(s.channels) + " seq=" +
                           std::to_string(s.seq) + " vocab_rows=" + std::to_string(s.vocab_rows));
  }
  return internal::CheckElementCount(s.n * s.channels, what);
}

}  // namespace

Status EmbeddingForward(float* out, const int32_t* tokens, const int32_t* positions,
                        const float* wte, const float* wpe, const EmbeddingShape& s,
                        Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckShape(s, positions != nullptr || wpe == nullptr, "EmbeddingForward"));
  if (s.n == 0) return Status::Ok();
  const int64_t total = s.n * s.channels;
  embedding_forward_kernel<<<internal::GridFor(total), internal::kBlock, 0, stream>>>(
      out, tokens, positions, wte, wpe, s.n, s.seq, s.channels, s.vocab_begin, s.vocab_rows);
  return internal::CheckLaunch("embedding_forward_kernel");
}

Status EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                         const int32_t* positions, const EmbeddingShape& s, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckShape(s, positions != nullptr || dwpe == nullptr, "EmbeddingBackward"));
  if (s.n == 0 || (dwte == nullptr && dwpe == nullptr)) return Status::Ok();
  const int64_t total = s.n * s.channels;
  embedding_backward_kernel<<<internal::GridFor(total), internal::kBlock, 0, stream>>>(
      dwte, dwpe, dout, tokens, positions, s.n, s.seq, s.channels, s.vocab_begin, s.vocab_rows);
  return internal::CheckLaunch("embedding_backward_kernel");
}

}  // namespace loom::cuda
