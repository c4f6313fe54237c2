// ZeRO memory: per-rank bytes of parameters, gradients and optimizer state equal the ZeRO
// formulas for every stage (fp32 Adam: m and v), counted by the tagged allocator; temporary
// communication buffers are gone after the step. Runs under mpirun with 4 ranks (dp = 4).
#include <gtest/gtest.h>

#include <cmath>

#include "core/memory.h"
#include "model/layout.h"
#include "parallel/zero/param_store.h"
#include "tests/mpi_test_main.h"

namespace loom {
namespace {

const ModelConfig kModel{/*vocab=*/101, /*max_seq=*/16, /*layers=*/3, /*heads=*/2, /*hidden=*/24};

struct Bytes {
  int64_t params, grads, optimizer, comm;
};
Bytes Now() {
  return {GetMemUsage(MemTag::kParams).current, GetMemUsage(MemTag::kGrads).current,
          GetMemUsage(MemTag::kOptimizer).current, GetMemUsage(MemTag::kComm).current};
}

class ZeroMemory : public ::testing::TestWithParam<int> {};

TEST_P(ZeroMemory, MatchesTheFormula) {
  const int zero = GetParam();
  auto world = testing::Mpi().World();
  ASSERT_TRUE(world.ok());
  Communicator& dp = **world;
  const int64_t d = dp.size();
  const ParamLayout layout = ModelLayout(kModel, 1);
  int64_t padded = 0;  // P': every bucket padded to a multiple of the dp size (documented padding)
  for (auto [b, e] : layout.buckets) padded += (e - b + d - 1) / d * d;
  ASSERT_GE(padded, layout.total);
  ASSERT_LT(padded - layout.total, d * layout.num_buckets());

  const Bytes before = Now();
  auto store = MakeParamStore(layout, AdamWConfig{}, {zero, &dp});
  ASSERT_TRUE(store.ok());
  const Bytes after = Now();
  const int64_t p = 4 * padded;  // fp32
  const int64_t expect_params = zero == 3 ? p / d : p;
  const int64_t expect_grads = zero == 0 ? p : zero == 1 ? p + p / d : p / d;
  const int64_t expect_opt = zero == 0 ? 2 * p : 2 * p / d;
  EXPECT_EQ(after.params - before.params, expect_params) << "stage " << zero;
  EXPECT_EQ(after.grads - before.grads, expect_grads) << "stage " << zero;
  EXPECT_EQ(after.optimizer - before.optimizer, expect_opt) << "stage " << zero;

  // One full step: gather (stage 3), gradients per bucket, reductions, update.
  ParamStore& s = **store;
  std::vector<float> init(static_cast<size_t>(layout.total), 0.5f);
  ASSERT_TRUE(s.LoadParams(init.data()).ok());
  ASSERT_TRUE(s.BeginStep().ok());
  for (int b = layout.num_buckets() - 1; b >= 0; --b) {
    ASSERT_TRUE(s.AcquireParams(b, b > 0 ? b - 1 : -1).ok());
    float* g = s.Grads(b);
    ASSERT_NE(g, nullptr);
    for (int64_t i = 0; i < layout.buckets[b].second - layout.buckets[b].first; ++i) g[i] = 0.01f;
    ASSERT_TRUE(s.GradsReady(b, true).ok());
    ASSERT_TRUE(s.ReleaseParams(b).ok());
  }
  auto norm = s.Step(1e-3);
  ASSERT_TRUE(norm.ok()) << norm.status().ToString();
  // Every rank contributed 0.01 per element: the reduced gradient is 0.01 * d everywhere.
  EXPECT_NEAR(*norm, 0.01 * d * std::sqrt(double(layout.total)), 1e-3 * *norm);
  const Bytes rest = Now();
  EXPECT_EQ(rest.params, after.params);
  EXPECT_EQ(rest.grads, after.grads);
  EXPECT_EQ(rest.optimizer, after.optimizer);
  EXPECT_EQ(rest.comm, before.comm) << "temporary buffers left after the step";
  // Parameters are consistent across ranks after the step.
  std::vector<float> mine(static_cast<size_t>(layout.total)), sum(mine.size());
  ASSERT_TRUE(s.CopyParams(mine.data()).ok());
  sum = mine;
  ASSERT_TRUE(dp.AllReduce(sum.data(), layout.total).ok());
  for (size_t i = 0; i < mine.size(); ++i) ASSERT_NEAR(sum[i], d * mine[i], 1e-5) << i;
  EXPECT_LT(mine[0], 0.5f);  // updated
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroMemory, ::testing::Values(0, 1, 2, 3));

}  // namespace
}  // namespace loom
