// The training-step kernels without a CPU twin (core/cuda/train_kernels.h) against plain loops,
// and DeviceMemory (core/cuda/device_memory.h) under the caching allocator. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/caching_allocator.h"
#include "core/cuda/device_memory.h"
#include "core/cuda/runtime.h"
#include "core/cuda/train_kernels.h"
#include "tests/core/cuda_test_util.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::DeviceBuffer;
using testing::ExpectAllClose;

struct Shape2 {
  int64_t n, c;
};
// Columns not a multiple of the 32-wide tile, rows not a multiple of the row lanes, one row.
constexpr Shape2 kShapes[] = {{37, 100}, {8, 768}, {1, 3}, {300, 64}};

TEST(CudaTrainKernels, AddBiasResidualMatchesLoop) {
  LOOM_REQUIRE_GPU();
  for (const auto [n, c] : kShapes) {
    const std::string what = "n=" + std::to_string(n) + " c=" + std::to_string(c);
    const auto out0 = testing::RandomVector<float>(n * c, 1),
               bias = testing::RandomVector<float>(c, 2),
               resid = testing::RandomVector<float>(n * c, 3);
    std::vector<float> with_resid = out0, bias_only = out0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < c; ++j) {
        with_resid[i * c + j] += bias[j] + resid[i * c + j];
        bias_only[i * c + j] += bias[j];
      }
    }
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_out, DeviceBuffer<float>::From(out0));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_bias, DeviceBuffer<float>::From(bias));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_resid, DeviceBuffer<float>::From(resid));
    LOOM_ASSERT_OK(cuda::AddBiasResidual(d_out.get(), d_bias.get(), d_resid.get(), n, c));
    LOOM_ASSERT_OK_AND_ASSIGN(auto got, d_out.Download());
    ExpectAllClose(got, with_resid, 0, 0, "with residual " + what);  // same operations: exact
    LOOM_ASSERT_OK(d_out.Upload(out0));
    LOOM_ASSERT_OK(cuda::AddBiasResidual(d_out.get(), d_bias.get(), nullptr, n, c));
    LOOM_ASSERT_OK_AND_ASSIGN(got, d_out.Download());
    ExpectAllClose(got, bias_only, 0, 0, "bias only " + what);
  }
}

TEST(CudaTrainKernels, BiasBackwardAccumulatesColumnSums) {
  LOOM_REQUIRE_GPU();
  for (const auto [n, c] : kShapes) {
    const std::string what = "n=" + std::to_string(n) + " c=" + std::to_string(c);
    const auto dout = testing::RandomVector<float>(n * c, 4);
    const auto dbias0 = testing::RandomVector<float>(c, 5);
    std::vector<double> want(dbias0.begin(), dbias0.end());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < c; ++j) want[j] += dout[i * c + j];
    }
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_dout, DeviceBuffer<float>::From(dout));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_dbias, DeviceBuffer<float>::From(dbias0));
    LOOM_ASSERT_OK(cuda::BiasBackward(d_dbias.get(), d_dout.get(), n, c));
    LOOM_ASSERT_OK_AND_ASSIGN(auto got, d_dbias.Download());
    ExpectAllClose(got, want, 1e-5, 1e-5, what);
    // Deterministic: a second run from the same start gives the same bits.
    LOOM_ASSERT_OK(d_dbias.Upload(dbias0));
    LOOM_ASSERT_OK(cuda::BiasBackward(d_dbias.get(), d_dout.get(), n, c));
    LOOM_ASSERT_OK_AND_ASSIGN(auto again, d_dbias.Download());
    EXPECT_EQ(again, got) << what;
  }
}

TEST(CudaTrainKernels, FillAndScale) {
  LOOM_REQUIRE_GPU();
  const int64_t n = 1000;
  const auto x = testing::RandomVector<float>(n, 6);
  LOOM_ASSERT_OK_AND_ASSIGN(auto d, DeviceBuffer<float>::From(x));
  LOOM_ASSERT_OK(cuda::Scale(d.get(), 0.25f, n));
  LOOM_ASSERT_OK_AND_ASSIGN(auto got, d.Download());
  std::vector<float> want = x;
  for (float& v : want) v *= 0.25f;
  EXPECT_EQ(got, want);
  LOOM_ASSERT_OK(cuda::Fill(d.get(), -3.5f, n - 1));
  LOOM_ASSERT_OK_AND_ASSIGN(got, d.Download());
  for (int64_t i = 0; i < n - 1; ++i) ASSERT_EQ(got[i], -3.5f) << i;
  EXPECT_EQ(got[n - 1], want[n - 1]);  // only n - 1 elements written
}

TEST(CudaDeviceMemory, ServesTheCachingAllocator) {
  LOOM_REQUIRE_GPU();
  LOOM_ASSERT_OK_AND_ASSIGN(auto raw, cuda::DeviceMemory::ForCurrentDevice());
  EXPECT_EQ(std::string(raw->name()), "cuda device " + std::to_string(raw->device()));
  CachingAllocator alloc(raw.get());
  LOOM_ASSERT_OK_AND_ASSIGN(void* p, alloc.Allocate(4000, MemTag::kGrads));
  // Device memory indeed: a round trip through it.
  std::vector<float> in(1000, 1.5f), out(1000, 0.0f);
  LOOM_ASSERT_OK(cuda::CopyToDevice(p, in.data(), 4000, nullptr));
  LOOM_ASSERT_OK(cuda::CopyToHost(out.data(), p, 4000, nullptr));
  EXPECT_EQ(out, in);
  EXPECT_EQ(alloc.usage(MemTag::kGrads).current, 4000);
  LOOM_ASSERT_OK(alloc.Free(p));
  EXPECT_EQ(alloc.usage(MemTag::kGrads).current, 0);
  // Freed blocks are cached and handed out again without a new cudaMalloc.
  const int64_t mallocs = alloc.raw_mallocs();
  LOOM_ASSERT_OK_AND_ASSIGN(void* q, alloc.Allocate(3900, MemTag::kActivations));
  EXPECT_EQ(q, p);
  EXPECT_EQ(alloc.raw_mallocs(), mallocs);
  LOOM_ASSERT_OK(alloc.Free(q));
  // An impossible request fails with the bytes and CUDA's reason, and nothing sticks: the next
  // launch is not blamed for it.
  auto huge = raw->Malloc(size_t{1} << 50);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().ToString().find(std::to_string(size_t{1} << 50)), std::string::npos)
      << huge.status().ToString();
  LOOM_ASSERT_OK_AND_ASSIGN(auto d, DeviceBuffer<float>::From(in));
  LOOM_ASSERT_OK(cuda::Scale(d.get(), 2.0f, 1000));
  LOOM_ASSERT_OK(cuda::Synchronize());
}

}  // namespace
}  // namespace loom
