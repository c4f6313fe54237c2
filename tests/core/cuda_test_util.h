// Helpers of the CUDA kernel tests: the GPU guard, a device buffer that round-trips host vectors,
// Status assertions and an element-wise comparison that reports the worst mismatches.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda/device.h"
#include "core/status.h"

// Every test that needs a GPU starts with this: without one it is skipped, saying why.
#define LOOM_REQUIRE_GPU()                                        \
  if (::loom::cuda::DeviceCount() == 0) {                         \
    GTEST_SKIP() << "no CUDA device (or driver) on this machine"; \
  }

#define LOOM_ASSERT_OK(expr)                                            \
  do {                                                                  \
    const ::loom::Status loom_st_ = (expr);                             \
    ASSERT_TRUE(loom_st_.ok()) << #expr << ": " << loom_st_.ToString(); \
  } while (0)

// `LOOM_ASSERT_OK_AND_ASSIGN(auto x, ResultExpr)`: declares x from the value or fails the test.
#define LOOM_ASSERT_OK_AND_ASSIGN_IMPL_(tmp, lhs, expr)              \
  auto tmp = (expr);                                                 \
  ASSERT_TRUE(tmp.ok()) << #expr << ": " << tmp.status().ToString(); \
  lhs = std::move(tmp).value()
#define LOOM_ASSERT_OK_AND_ASSIGN(lhs, expr) \
  LOOM_ASSERT_OK_AND_ASSIGN_IMPL_(LOOM_CONCAT_(loom_test_result_, __LINE__), lhs, expr)

namespace loom::testing {

// Device memory for n elements of T; copies to and from host vectors on the legacy default stream
// (which the launchers under test use), so a copy back waits for the kernels before it.
template <typename T>
class DeviceBuffer {
 public:
  // Filled with 0xff bytes (NaN for floats): an output element the kernel fails to write shows.
  static Result<DeviceBuffer> Poisoned(size_t n) {
    DeviceBuffer buf;
    buf.n_ = n;
    if (n == 0) return buf;
    void* p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, n * sizeof(T)); e != cudaSuccess) {
      return Internal(std::string("cudaMalloc: ") + cudaGetErrorString(e));
    }
    buf.ptr_ = static_cast<T*>(p);
    if (cudaError_t e = cudaMemset(p, 0xff, n * sizeof(T)); e != cudaSuccess) {
      return Internal(std::string("cudaMemset: ") + cudaGetErrorString(e));
    }
    return buf;
  }
  static Result<DeviceBuffer> From(const std::vector<T>& host) {
    auto buf = Poisoned(host.size());
    if (!buf.ok()) return buf.status();
    if (Status st = buf->Upload(host); !st.ok()) return st;
    return buf;
  }

  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(n_, o.n_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
  }

  T* get() const { return ptr_; }
  size_t size() const { return n_; }

  Status Upload(const std::vector<T>& host) {
    if (host.size() != n_) return InvalidArgument("DeviceBuffer::Upload: size mismatch");
    if (n_ == 0) return Status::Ok();
    cudaError_t e = cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return Internal(std::string("cudaMemcpy H2D: ") + cudaGetErrorString(e));
    return Status::Ok();
  }
  // Waits for the kernels queued before it (and reports their faults).
  Result<std::vector<T>> Download() const {
    std::vector<T> host(n_);
    if (n_ == 0) return host;
    cudaError_t e = cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return Internal(std::string("cudaMemcpy D2H: ") + cudaGetErrorString(e));
    return host;
  }

 private:
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

// Expects |got[i] - want[i]| <= atol + rtol * |want[i]| for every i (NaN never passes), and
// reports the count of failures and the first few of them in one failure.
template <typename A, typename B>
void ExpectAllClose(const std::vector<A>& got, const std::vector<B>& want, double rtol, double atol,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  double worst = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    const double err = std::fabs(g - w);
    const bool same_inf = std::isinf(g) && std::isinf(w) && (g > 0) == (w > 0);
    if (same_inf || err <= atol + rtol * std::fabs(w)) continue;  // NaN fails: comparisons false
    if (bad < 5) {
      std::ostringstream os;
      os.precision(9);
      os << "\n  [" << i << "] got " << g << " want " << w;
      first += os.str();
    }
    ++bad;
    if (!(err <= worst)) worst = err;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements off (rtol "
                     << rtol << ", atol " << atol << "), largest error " << worst << first;
}

}  // namespace loom::testing
