// Internal to core/cuda/: turning CUDA runtime errors into Status. Every CUDA call and every launch
// in this directory goes through one of these; nothing aborts.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace loom::cuda::internal {

// Internal("CUDA <what>: <error string>") unless err is cudaSuccess.
inline Status Check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Internal(std::string("CUDA ") + what + ": " + cudaGetErrorString(err) + " (" +
                  cudaGetErrorName(err) + ")");
}

// After a <<<...>>> launch: reports a bad configuration or a sticky error from earlier work. Does
// not wait for the kernel (errors during its execution surface at the next synchronisation).
inline Status CheckLaunch(const char* kernel) {
  return Check(cudaGetLastError(), kernel);
}

// Threads per block of the one-thread-per-element kernels.
constexpr int kBlock = 256;

// Blocks covering n elements with kBlock threads each (n > 0). The grid's x dimension allows
// 2^31 - 1 blocks, far beyond any tensor here; callers check n fits anyway (CheckElementCount).
inline unsigned GridFor(int64_t n, int block = kBlock) {
  return static_cast<unsigned>((n + block - 1) / block);
}

inline Status CheckElementCount(int64_t n, const char* what) {
  if (n < 0) return InvalidArgument(std::string(what) + ": negative element count");
  if ((n + kBlock - 1) / kBlock > int64_t{0x7fffffff}) {
    return InvalidArgument(std::string(what) + ": too many elements for one launch");
  }
  return Status::Ok();
}

}  // namespace loom::cuda::internal
