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

// SC'21 table 2: PTD-P against ZeRO-3 without model parallelism at fixed global batch, 175 B
// (96 heads, h 12288, 96 layers, batch 1,536) and 530 B (128 heads, h 20480, 105 layers, batch
// 2,240; 2,560 at 640 GPUs, the starred row) on A100s, with the calibration of table 1. PTD-P
// as published (tp 8 with pp 12 or pp 35, micro-batch 1, full recompute). ZeRO-3 dp = GPUs,
// micro-batch = batch / GPUs, one gather per step: its steps last ~65 s at 768 and 1,536 GPUs
// whatever the compute, and ~180 s for 530 B at 1,120 and 2,240: a fixed 6 bytes per parameter
// per rank at ~16 GB/s, 0.65 of a GPU's own 25 GB/s NIC, which the shipped calibration's
// `zero3_rank_bandwidth` states (fitted on the 175 B row at 1,536 GPUs alone, docs/PLANNER.md).
// Held: PTD-P within 10 % and ZeRO-3 within 25 % on every row (the 530 B rows are a check of
// the fit, not part of it), PTD-P at least 2.4x ZeRO-3 at 1,536 GPUs. The 530 B ZeRO-3 row at
// 640 GPUs (micro-batch 4) is left out: it needs 111 GB a GPU as Loom keeps activations.
struct Table2Row {
  const char* model;
  int64_t heads, hidden, layers, batch, gpus;
  int ptdp_pp;
  double ptdp, zero3;  // published TF/s per GPU
};

TEST(PublishedRunsTable2, PtdpAndZero3AtFixedBatch) {
  const Cluster cluster = LoadShippedCluster("dgx-a100.yaml");
  const Calibration cal = LoadShippedCalibration("dgx-a100.calibration.json");
  ASSERT_GT(cal.zero3_rank_bandwidth, 0) << "the shipped A100 calibration states ZeRO-3's rate";
  double ratio_1536 = 0;
  for (const Table2Row& row : {Table2Row{"175B", 96, 12288, 96, 1536, 384, 12, 153, 144},
                               Table2Row{"175B", 96, 12288, 96, 1536, 768, 12, 149, 88},
                               Table2Row{"175B", 96, 12288, 96, 1536, 1536, 12, 141, 44},
                               Table2Row{"530B", 128, 20480, 105, 2240, 1120, 35, 167, 98},
                               Table2Row{"530B", 128, 20480, 105, 2240, 2240, 35, 159, 48}}) {
    const PlanJob job = MegatronJob(row.heads, row.hidden, row.layers, row.batch, row.gpus);
    const PlanJob z = Zero3Job(row.heads, row.hidden, row.layers, row.batch, row.gpus);
    Result<SearchResult> zero3 = SearchPlans(z, cluster, cal, 1);
    ASSERT_TRUE(zero3.ok()) << zero3.status().ToString();
    const Prediction& q = zero3->plans[0];
    std::printf(
        "%s on %lld A100s: ZeRO-3 dp %lld mb %lld -> %.1f TF/s (published %.0f, %+.1f %%), "
        "%.0f GB per rank per step, network busy %.1f s of %.1f s\n",
        row.model, static_cast<long long>(row.gpus), static_cast<long long>(row.gpus),
        static_cast<long long>(*z.micro_batch), q.tflops_per_device, row.zero3,
        100 * (q.tflops_per_device / row.zero3 - 1), q.bytes.dp / 1e9, q.links.busy[kInterNode],
        q.time.step);
    EXPECT_TRUE(q.fits());
    // Two gathers and a reduce-scatter of the bf16 parameters per step, (n-1)/n of each.
    const double params = row.layers * 12.0 * row.hidden * row.hidden;
    EXPECT_NEAR(q.bytes.dp, 6 * params, 0.01 * 6 * params);
    EXPECT_NEAR(q.tflops_per_device, row.zero3, 0.25 * row.zero3);
    Result<SearchResult> ptdp = SearchPlans(Published(job, 8, row.ptdp_pp), cluster, cal, 1);
    ASSERT_TRUE(ptdp.ok()) << ptdp.status().ToString();
    const Prediction& p = ptdp->plans[0];
    std::printf(
        "%s on %lld A100s: PTD-P %s -> %.1f TF/s (published %.0f, %+.1f %%), %.2fx ZeRO-3 "
        "(published %.2fx)\n",
        row.model, static_cast<long long>(row.gpus), p.candidate.ToString().c_str(),
        p.tflops_per_device, row.ptdp, 100 * (p.tflops_per_device / row.ptdp - 1),
        p.tflops_per_device / q.tflops_per_device, row.ptdp / row.zero3);
    EXPECT_TRUE(p.fits());
    EXPECT_NEAR(p.tflops_per_device, row.ptdp, 0.10 * row.ptdp);
    if (row.layers == 96 && row.gpus == 1536)
      ratio_1536 = p.tflops_per_device / q.tflops_per_device;
  }
  EXPECT_GE(ratio_1536, 2.4) << "PTD-P over ZeRO-3, 175 B on 1,536 GPUs (published 3.2x)";
}

// Without the calibration's ZeRO-3 bound the same 1,536-GPU step is priced at NCCL's ring over
// every NIC of a node: the bound is what moves it, not another term.
TEST(PublishedRunsTable2, Zero3BoundIsTheCalibrationsField) {
  const Cluster cluster = LoadShippedCluster("dgx-a100.yaml");
  Calibration cal = LoadShippedCalibration("dgx-a100.calibration.json");
  const PlanJob z = Zero3Job(96, 12288, 96, 1536, 1536);
  Result<SearchResult> bound = SearchPlans(z, cluster, cal, 1);
  cal.zero3_rank_bandwidth = -1;
  Result<SearchResult> rings = SearchPlans(z, cluster, cal, 1);
  ASSERT_TRUE(bound.ok() && rings.ok());
  const double b = bound->plans[0].time.step, r = rings->plans[0].time.step;
  std::printf("175B ZeRO-3 on 1536 A100s: step %.1f s with the bound, %.1f s at the rings\n", b, r);
  // 1,046 GB per rank at the rings' 185 GB/s a node is ~6 s of a compute-bound step.
  EXPECT_GT(b, 3 * r);
  EXPECT_LT(bound->plans[0].links.busy[kInterNode] / b, 1.01);
  // Inside one node (1.7 B on 8 GPUs) the bound does not apply: NVLink, not the network.
  const PlanJob small = Zero3Job(24, 2304, 24, 64, 8);
  Result<SearchResult> node = SearchPlans(small, cluster, cal, 1);
  cal.zero3_rank_bandwidth = 1e9;  // 10 s for its 10 GB a step, were it applied
  Result<SearchResult> node_bound = SearchPlans(small, cluster, cal, 1);
  ASSERT_TRUE(node.ok() && node_bound.ok());
  EXPECT_DOUBLE_EQ(node->plans[0].time.step, node_bound->plans[0].time.step);
}

}  // namespace
}  // namespace loom
