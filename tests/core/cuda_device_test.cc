// Device discovery and selection: the local rank from the launcher's environment, the device a
// rank selects, and errors (not aborts) without a GPU. Most of this runs without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "core/cuda/device.h"
#include "core/cuda/gemm.h"
#include "tests/core/cuda_test_util.h"

namespace loom {
namespace {

constexpr const char* kRankVars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"};

// Clears the three variables for the test and restores what was there afterwards.
class LocalRankEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kRankVars) {
      const char* old = std::getenv(v);
      saved_[v] = old ? std::optional<std::string>(old) : std::nullopt;
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

TEST_F(LocalRankEnv, ZeroWhenNoLauncherVariableIsSet) {
  LOOM_ASSERT_OK_AND_ASSIGN(int rank, cuda::LocalRankFromEnv());
  EXPECT_EQ(rank, 0);
}

TEST_F(LocalRankEnv, FirstPresentVariableWins) {
  setenv("LOCAL_RANK", "3", 1);
  LOOM_ASSERT_OK_AND_ASSIGN(int r1, cuda::LocalRankFromEnv());
  EXPECT_EQ(r1, 3);
  setenv("SLURM_LOCALID", "2", 1);
  LOOM_ASSERT_OK_AND_ASSIGN(int r2, cuda::LocalRankFromEnv());
  EXPECT_EQ(r2, 2);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "7", 1);
  LOOM_ASSERT_OK_AND_ASSIGN(int r3, cuda::LocalRankFromEnv());
  EXPECT_EQ(r3, 7);
}

TEST_F(LocalRankEnv, MalformedValueNamesTheVariable) {
  for (const char* bad : {"", "x", "1x", "-1", "99999999999"}) {
    setenv("SLURM_LOCALID", bad, 1);
    const auto r = cuda::LocalRankFromEnv();
    ASSERT_FALSE(r.ok()) << "'" << bad << "' was accepted";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("SLURM_LOCALID"), std::string::npos)
        << r.status().ToString();
  }
}

// Without a device: FailedPrecondition naming the rank and the count. With devices: rank modulo
// count, and that device is current afterwards.
TEST(CudaDevice, SelectDeviceWrapsOrExplains) {
  const int devices = cuda::DeviceCount();
  const auto r = cuda::SelectDevice(5);
  if (devices == 0) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(r.status().message().find("local rank 5"), std::string::npos)
        << r.status().ToString();
    EXPECT_NE(r.status().message().find("device count 0"), std::string::npos)
        << r.status().ToString();
    return;
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 5 % devices);
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 5 % devices);
  LOOM_ASSERT_OK_AND_ASSIGN(int zero, cuda::SelectDevice(0));  // leave device 0 current
  EXPECT_EQ(zero, 0);
}

TEST(CudaDevice, NegativeRankIsInvalid) {
  const auto r = cuda::SelectDevice(-1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

// Synchronize and the GEMM handle report errors without a device instead of aborting.
TEST(CudaDevice, SynchronizeAndGemmHandleWithOrWithoutDevice) {
  const int devices = cuda::DeviceCount();
  const Status sync = cuda::Synchronize();
  auto handle = cuda::GemmHandle::Create();
  if (devices == 0) {
    EXPECT_FALSE(sync.ok()) << "synchronised a stream without a device";
    EXPECT_FALSE(handle.ok()) << "made a cuBLASLt handle and workspace without a device";
  } else {
    EXPECT_TRUE(sync.ok()) << sync.ToString();
    ASSERT_TRUE(handle.ok()) << handle.status().ToString();
    EXPECT_NE(handle->lt(), nullptr);
    EXPECT_NE(handle->workspace(), nullptr);
    // Moving leaves the source empty (no double free on destruction).
    cuda::GemmHandle moved = std::move(*handle);
    EXPECT_EQ(handle->lt(), nullptr);
    EXPECT_NE(moved.lt(), nullptr);
  }
}

}  // namespace
}  // namespace loom
