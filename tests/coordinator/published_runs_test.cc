// The planner against published measurements: Megatron-LM on A100-80GB (Narayanan et al.,
// "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC'21,
// table 1). One calibration (deploy/clusters/dgx-a100.calibration.json) for all three runs; TF/s
// counts the recomputed forward, as the paper does.
#include <gtest/gtest.h>

#include <cstdio>

#include "coordinator/planner/search.h"
#include "tests/coordinator/planner_test_util.h"

namespace loom {
namespace {

struct PublishedRun {
  const char* name;
  int64_t heads, hidden, layers, batch, gpus;
  int tp, pp;
  double published_tflops;
};

class PublishedRuns : public ::testing::TestWithParam<PublishedRun> {};

TEST_P(PublishedRuns, PredictionMatchesAndSearchFindsAsGood) {
  const PublishedRun& run = GetParam();
  const Cluster cluster = LoadShippedCluster("dgx-a100.yaml");
  const Calibration cal = LoadShippedCalibration("dgx-a100.calibration.json");
  const PlanJob job = MegatronJob(run.heads, run.hidden, run.layers, run.batch, run.gpus);

  Result<SearchResult> fixed = SearchPlans(Published(job, run.tp, run.pp), cluster, cal, 1);
  ASSERT_TRUE(fixed.ok()) << fixed.status().ToString();
  const Prediction& pub = fixed->plans[0];
  std::printf(
      "%s published layout: %s -> %.1f TF/s/GPU (published %.0f), step %.2f s, "
      "peak memory %.1f GB (stage %d)\n",
      run.name, pub.candidate.ToString().c_str(), pub.tflops_per_device, run.published_tflops,
      pub.time.step, pub.peak_memory / 1e9, pub.peak_stage);
  const StepBreakdown& t = pub.time;
  std::printf("  compute %.2f tp %.2f cp %.2f zero %.2f bubble %.2f pp %.2f dp %.2f opt %.2f\n",
              t.compute, t.tp, t.cp, t.zero, t.bubble, t.pp, t.dp, t.optimizer);
  EXPECT_NEAR(pub.tflops_per_device, run.published_tflops, 0.10 * run.published_tflops);
  EXPECT_LE(pub.peak_memory, 80e9) << "the published layout must fit in 80 GB";

  Result<SearchResult> free = SearchPlans(job, cluster, cal, 5);
  ASSERT_TRUE(free.ok()) << free.status().ToString();
  const Prediction& best = free->plans[0];
  std::printf(
      "%s chosen: %s -> %.1f TF/s/GPU, %.0f tokens/s (%.2fx the published layout), "
      "%.1f GB, search %.3f s (%lld layouts, %lld priced)\n",
      run.name, best.candidate.ToString().c_str(), best.tflops_per_device, best.tokens_per_s,
      best.tokens_per_s / pub.tokens_per_s, best.peak_memory / 1e9, free->stats.seconds,
      static_cast<long long>(free->stats.enumerated),
      static_cast<long long>(free->stats.evaluated));
  EXPECT_GE(best.tokens_per_s, 0.95 * pub.tokens_per_s);
  EXPECT_LE(best.candidate.layout.tp, 8);
  for (const Prediction& p : free->plans) {
    EXPECT_LE(p.candidate.layout.tp, 8);
    EXPECT_TRUE(p.fits());
  }
}

INSTANTIATE_TEST_SUITE_P(
    MegatronSC21, PublishedRuns,
    ::testing::Values(PublishedRun{"1.7B", 24, 2304, 24, 512, 32, 1, 1, 137},
                      PublishedRun{"145.6B", 96, 12288, 80, 2304, 1536, 8, 8, 148},
                      PublishedRun{"1008B", 160, 25600, 128, 3072, 3072, 8, 64, 163}),
    [](const ::testing::TestParamInfo<PublishedRun>& info) {
      std::string n = info.param.name;
      for (char& ch : n) ch = (ch == '.') ? '_' : ch;
      return "gpt_" + n;
    });

}  // namespace
}  // namespace loom
