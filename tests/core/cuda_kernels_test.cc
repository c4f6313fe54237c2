// CUDA twins agree with the CPU kernels. Skipped (with the reason) where no GPU is present;
// compiled wherever the CUDA toolkit is, so CI checks that the CUDA code builds and links.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/cuda/device.h"
#include "core/kernels/elementwise.h"
#include "tests/test_util.h"

namespace loom {
namespace {

TEST(CudaKernels, GeluMatchesCpu) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device (or driver) on this machine";
  auto x = testing::RandomVector<float>(10000, 1, 3.0);
  std::vector<float> cpu(x.size()), gpu(x.size());
  GeluForward(cpu.data(), x.data(), static_cast<int64_t>(x.size()));
  Status st = cuda::GeluForwardHost(gpu.data(), x.data(), static_cast<int64_t>(x.size()));
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(gpu[i], cpu[i], 1e-5f);
}

// Without a usable GPU (or driver) the count is 0 and a kernel call returns an error naming the
// CUDA call that failed, instead of aborting or pretending to succeed; with one, the same call
// succeeds. Either way the test asserts something that a broken discovery would violate.
TEST(CudaKernels, NoDeviceIsReportedNotFatal) {
  const int devices = cuda::DeviceCount();
  ASSERT_GE(devices, 0);
  const std::vector<float> x{-1.0f, 0.0f, 2.0f};
  std::vector<float> y(x.size(), -7.0f);
  const Status st = cuda::GeluForwardHost(y.data(), x.data(), static_cast<int64_t>(x.size()));
  if (devices == 0) {
    ASSERT_FALSE(st.ok()) << "no CUDA device, yet a kernel ran";
    EXPECT_NE(st.ToString().find("CUDA cudaMalloc"), std::string::npos) << st.ToString();
    EXPECT_EQ(y, std::vector<float>(x.size(), -7.0f)) << "the output was written without a device";
  } else {
    ASSERT_TRUE(st.ok()) << devices << " CUDA devices, yet the kernel failed: " << st.ToString();
    EXPECT_EQ(y[1], 0.0f);  // GELU(0) = 0
  }
}

}  // namespace
}  // namespace loom
