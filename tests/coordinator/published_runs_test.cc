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

// SC'21 table 2: 175 B (96 heads, h 12288, 96 layers) at global batch 1,536 on 384, 768 and 1,536
// A100s. PTD-P (model-parallel size 96: tp 8, pp 12) must be predicted within 10 % with the same
// calibration as table 1. The table's ZeRO-3 figures (144, 88, 44 TF/s: a step of about 65 s at
// 768 and 1,536 GPUs whatever the compute) are DeepSpeed's 2021 ZeRO-3, not NCCL's ring limits,
// which the planner prices (docs/PLANNER.md, Limits); they are printed beside the prediction,
// and the prediction is held to what the model says of its cause: 3 x 2 bytes per parameter per
// sample through the network, per rank, whatever dp.
TEST(PublishedRunsTable2, PtdpWithinTenPercentZero3Printed) {
  const Cluster cluster = LoadShippedCluster("dgx-a100.yaml");
  const Calibration cal = LoadShippedCalibration("dgx-a100.calibration.json");
  struct Row {
    int64_t gpus;
    double ptdp, zero3;  // published TF/s per GPU
  };
  for (const Row& row : {Row{384, 153, 144}, Row{768, 149, 88}, Row{1536, 141, 44}}) {
    const PlanJob job = MegatronJob(96, 12288, 96, 1536, row.gpus);
    Result<SearchResult> ptdp = SearchPlans(Published(job, 8, 12), cluster, cal, 1);
    ASSERT_TRUE(ptdp.ok()) << ptdp.status().ToString();
    PlanJob z = Published(job, 1, 1);
    z.zero = 3;
    z.micro_batch = 1536 / row.gpus;
    Result<SearchResult> zero3 = SearchPlans(z, cluster, cal, 1);
    ASSERT_TRUE(zero3.ok()) << zero3.status().ToString();
    const Prediction& p = ptdp->plans[0];
    const Prediction& q = zero3->plans[0];
    std::printf(
        "175B on %lld A100s: PTD-P %s -> %.1f TF/s (published %.0f, %+.1f %%); ZeRO-3 dp %lld -> "
        "%.1f TF/s (published %.0f), %.0f GB per rank per step, network busy %.1f s of %.1f s\n",
        static_cast<long long>(row.gpus), p.candidate.ToString().c_str(), p.tflops_per_device,
        row.ptdp, 100 * (p.tflops_per_device / row.ptdp - 1), static_cast<long long>(row.gpus),
        q.tflops_per_device, row.zero3, q.bytes.dp / 1e9, q.links.busy[kInterNode], q.time.step);
    EXPECT_NEAR(p.tflops_per_device, row.ptdp, 0.10 * row.ptdp);
    EXPECT_TRUE(p.fits());
    // Two gathers and a reduce-scatter of 174.6 B bf16 parameters per sample, (n-1)/n of each.
    EXPECT_NEAR(q.bytes.dp / 1e9, 1046, 5);
  }
}

}  // namespace
}  // namespace loom
