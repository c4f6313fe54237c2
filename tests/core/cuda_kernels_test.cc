// CUDA twins agree with the CPU kernels. Skipped (with the reason) where no GPU is present;
// compiled wherever the CUDA toolkit is, so CI checks that the CUDA code builds and links.
#include <gtest/gtest.h>

#include <cmath>

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

TEST(CudaKernels, NoDeviceIsReportedNotFatal) {
  // Holds with and without a GPU: the count is a number, never a crash.
  EXPECT_GE(cuda::DeviceCount(), 0);
}

}  // namespace
}  // namespace loom
