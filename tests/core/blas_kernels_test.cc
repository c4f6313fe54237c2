// The OpenBLAS core type chosen for this CPU follows its instruction set.
#include "core/blas_kernels.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

TEST(BlasKernels, CoreTypeFollowsTheInstructionSet) {
  __builtin_cpu_init();
  const std::string best = BestBlasCoreType();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    EXPECT_EQ(best, "SkylakeX");
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_EQ(best, "Haswell");
  } else {
    EXPECT_EQ(best, "");
  }
}

}  // namespace
}  // namespace loom
