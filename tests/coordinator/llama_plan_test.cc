// The planner prices Llama-family models (issue "Llama-family models"): parameter counts that
// match the published ones exactly, per-rank shapes for grouped-query attention (KV heads split,
// then replicated beyond their number), SwiGLU widths, an untied output on the last stage, and a
// search that finds a layout for Llama 3 405B on 16,384 H100s at 8K and 131K tokens within the
// issue's search-time target.
#include <gtest/gtest.h>

#include <chrono>

#include "coordinator/planner/hardware.h"
#include "coordinator/planner/layer_model.h"
#include "coordinator/planner/model_math.h"
#include "coordinator/planner/report.h"
#include "coordinator/planner/search.h"
#include "model/config.h"
#include "tests/coordinator/planner_test_util.h"

namespace loom {
namespace {

ModelConfig Llama(int64_t layers, int64_t hidden, int64_t heads, int64_t kv, int64_t ffn) {
  ModelConfig m{128256, 8192, layers, heads, hidden};
  m.family = ModelFamily::kLlama;
  m.kv_heads = kv;
  m.ffn_hidden = ffn;
  m.rope_theta = 500000;
  m.tie_embeddings = false;
  return m;
}

// The shipped DGX H100 manifest grown to `nodes` nodes of 8 GPUs.
Cluster H100Nodes(int nodes) {
  Cluster cluster = LoadShippedCluster("dgx-h100.yaml");
  if (cluster.nodes.empty()) return cluster;
  Node proto = cluster.nodes[0];
  cluster.nodes.clear();
  for (int i = 0; i < nodes; ++i) {
    proto.name = proto.host = "node-" + std::to_string(i);
    cluster.nodes.push_back(proto);
  }
  return cluster;
}

TEST(LlamaPlan, ParameterCountsAreThePublishedOnes) {
  // Hugging Face's counts of Meta-Llama-3.1-8B and -405B (embeddings, layers, final norm).
  EXPECT_EQ(TotalParams(Llama(32, 4096, 32, 8, 14336)), 8030261248.0);
  EXPECT_EQ(TotalParams(Llama(126, 16384, 128, 8, 53248)), 405853388800.0);
  // GPT-2 124M is unchanged: 124,439,808 with its 1,024 positions.
  EXPECT_EQ(TotalParams(ModelConfig{50257, 1024, 12, 12, 768}), 124439808.0);
}

TEST(LlamaPlan, GroupedQueryShapesPerRank) {
  const ModelConfig m = Llama(32, 4096, 32, 8, 14336);
  const double h = 4096, f = 14336, d = 128;
  // tp 8: one KV head per rank; tp 16: still one (replicated), while Q, O and the MLP split.
  EXPECT_EQ(LayerParamsPerRank(m, 8), (2 * h * h + 3 * h * f) / 8 + 2 * h * d + 2 * h);
  EXPECT_EQ(LayerParamsPerRank(m, 16), (2 * h * h + 3 * h * f) / 16 + 2 * h * d + 2 * h);
  EXPECT_EQ(LayerParamsPerRank(m, 1), LayerParams(m));
  const std::vector<GemmShape> g = LayerForwardGemms(m, 1, 8192, 8, 1);
  EXPECT_EQ(g[kQkv].n, h / 8 + 2 * d);
  EXPECT_EQ(g[kFc1].n, 2 * f / 8);  // gate and up
  EXPECT_EQ(g[kFc2].k, f / 8);
  EXPECT_EQ(OutputParamsPerRank(m, 8), 128256.0 / 8 * h);
  ModelConfig tied = m;
  tied.tie_embeddings = true;
  EXPECT_EQ(OutputParamsPerRank(tied, 8), 0);
}

TEST(LlamaPlan, ContextParallelRingCarriesOnlyTheKvHeads) {
  // worker/llama_layer.cc: under CP the ring passes the KV heads a rank's queries read. Llama 3
  // 405B at tp 8 (one KV head of 16 query heads per rank) against the same model with as many
  // KV heads as query heads: a sixteenth of the context-parallel bytes.
  const Cluster cluster = H100Nodes(32);
  const Calibration cal = LoadShippedCalibration("dgx-h100.calibration.json");
  double bytes[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    PlanJob job;
    job.model = Llama(126, 16384, 128, i == 0 ? 8 : 128, 53248);
    job.model.max_seq = job.seq = 32768;
    job.global_batch = 8;
    job.precision = Precision::kBf16;
    job.devices = 256;
    job.tp = 8;
    job.cp = 4;
    job.pp = 8;
    job.dp = 1;
    job.vpp = 1;
    job.micro_batch = 1;
    job.sp = true;
    job.recompute = Recompute::kFull;
    job.zero = 1;
    job.headroom = 0;
    job.mixed_precision_states = true;  // Meta's states: the layout fits in 80 GB as theirs did
    job.mixed_precision_activations = true;
    Result<SearchResult> r = SearchPlans(job, cluster, cal, 1);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    bytes[i] = r->plans[0].bytes.cp;
  }
  ASSERT_GT(bytes[0], 0);
  EXPECT_NEAR(bytes[1] / bytes[0], 16, 1e-9);
}

TEST(LlamaPlan, AttentionAtTheRanksOwnQueryLength) {
  // The H100 calibration's FlashAttention-2 rates by length: under context parallelism a rank
  // folds in blocks of seq / cp rows, priced at that length's (slower) rate.
  const Cluster cluster = H100Nodes(1);
  const Calibration cal = LoadShippedCalibration("dgx-h100.calibration.json");
  const Hardware hw = MakeHardware(cluster, 0, cal, Precision::kBf16, 1);
  PlanJob job;
  job.model = Llama(126, 16384, 128, 8, 53248);
  job.model.max_seq = job.seq = 8192;
  job.precision = Precision::kBf16;
  double per_flop[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const int cp = i == 0 ? 1 : 8;
    const Layout L{8, cp, 1, 1, 1, 1, true};
    const std::vector<GemmShape> g = LayerForwardGemms(job.model, 1, job.seq, 8, cp);
    const double flops = g[kScores].flops() + g[kContext].flops();
    per_flop[i] = (LayerCompute(job, hw, L, 1, Recompute::kNone).attn_fwd - hw.op_overhead) / flops;
  }
  EXPECT_NEAR(per_flop[0], 1 / 552.2e12, 1e-18);  // 8,192 query rows
  EXPECT_NEAR(per_flop[1], 1 / 445.7e12, 1e-18);  // 1,024
}

TEST(LlamaPlan, Llama3_405BOn16384H100s) {
  const Cluster cluster = H100Nodes(2048);
  ASSERT_EQ(cluster.nodes.size(), 2048u);
  const Calibration cal = LoadShippedCalibration("dgx-h100.calibration.json");
  for (int64_t seq : {int64_t{8192}, int64_t{131072}}) {
    PlanJob job;
    job.model = Llama(126, 16384, 128, 8, 53248);
    job.model.max_seq = seq;
    job.seq = seq;
    job.global_batch = 16 * 1024 * 1024 / seq;  // 16M tokens per step, as Meta's pre-training
    job.precision = Precision::kBf16;
    job.dropout = false;
    const auto t0 = std::chrono::steady_clock::now();
    Result<SearchResult> r = SearchPlans(job, cluster, cal, 3);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(r.ok()) << "seq " << seq << ": " << r.status().ToString();
    const Prediction& best = r->plans[0];
    EXPECT_EQ(best.candidate.layout.world(), 16384);
    EXPECT_TRUE(best.candidate.layout.ChunkLayers(126).ok());  // even, or uneven stages
    EXPECT_LE(best.peak_memory, best.capacity);
    EXPECT_GT(best.time.step, 0);
    // Long sequences need context parallelism to fit the activations (the paper used cp 16).
    if (seq == 131072) {
      EXPECT_GT(best.candidate.layout.cp, 1) << best.candidate.ToString();
    }
    std::printf(
        "Llama 3 405B, seq %lld: %s, %.2f s/step, MFU %.1f%%, %.1f GB of %.1f GB; search "
        "%.2f s (%lld layouts)\n",
        static_cast<long long>(seq), best.candidate.ToString().c_str(), best.time.step,
        100 * best.mfu, best.peak_memory / 1e9, best.capacity / 1e9, s,
        static_cast<long long>(r->stats.enumerated));
  }
}

// Meta's published Llama 3 405B layouts (Llama Team, "The Llama 3 Herd of Models", 2024, table 4)
// priced with the shipped H100 calibration, whose figures come from public measurements, none
// fitted to these runs (docs/PLANNER.md, Calibration). tp, cp, pp, dp and the micro-batch
// are Meta's; the schedule's depth (vpp), the stage split, ZeRO and recomputation are left to the
// search, which must fit them in memory. Compared: model TF/s per GPU (MFU x peak; attention
// counted full-square, as torchtitan counts it), not counting recomputation.
TEST(LlamaPlan, MetaTable4LayoutsWithTheShippedH100Calibration) {
  const Cluster cluster = H100Nodes(2048);
  ASSERT_EQ(cluster.nodes.size(), 2048u);
  const Calibration cal = LoadShippedCalibration("dgx-h100.calibration.json");
  struct Row {
    int64_t gpus, cp, dp, seq;
    double published;  // TF/s per GPU (BF16 MFU 43 %, 41 %, 38 % of 989)
  };
  const Row rows[] = {
      {8192, 1, 64, 8192, 430}, {16384, 1, 128, 8192, 400}, {16384, 16, 8, 131072, 380}};
  double predicted[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    const Row& row = rows[i];
    PlanJob job;
    job.model = Llama(126, 16384, 128, 8, 53248);
    job.model.max_seq = row.seq;
    job.seq = row.seq;
    job.global_batch = 16 * 1024 * 1024 / row.seq;  // 16M tokens per step
    job.precision = Precision::kBf16;
    job.dropout = false;
    // Meta reduce-scattered gradients in FP32 (the paper's "numerical stability" paragraph)
    // and gathered bf16 parameters.
    job.grad_comm_bytes = 4;
    job.param_comm_bytes = 2;
    job.mixed_precision_states = true;
    job.mixed_precision_activations = true;
    job.devices = row.gpus;
    job.tp = 8;
    job.cp = row.cp;
    job.pp = 16;
    job.dp = row.dp;
    job.micro_batch = 1;
    job.sp = true;
    Result<SearchResult> r = SearchPlans(job, cluster, cal, 1);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Prediction& p = r->plans[0];
    const StepBreakdown& t = p.time;
    predicted[i] = p.mfu * 989e12 / 1e12;
    std::printf(
        "Llama 3 405B on %lld H100s, seq %lld: %s -> %.0f TF/s per GPU (published %.0f, %+.1f %%), "
        "step %.2f s, %.1f GB\n  compute %.2f tp %.2f cp %.2f bubble %.2f dp %.2f slowdown %.2f\n",
        static_cast<long long>(row.gpus), static_cast<long long>(row.seq),
        p.candidate.ToString().c_str(), predicted[i], row.published,
        100 * (predicted[i] / row.published - 1), t.step, p.peak_memory / 1e9, t.compute, t.tp,
        t.cp, t.bubble, t.dp, t.slowdown);
    EXPECT_LE(p.peak_memory, p.capacity);
  }
  // Within 20 % of Meta's figures, and at 8K the larger data-parallel group (half the
  // micro-batches per pipeline, a larger bubble share) slower per GPU, as published. Why the
  // predictions are low: docs/PLANNER.md (Validation against published runs).
  for (int i = 0; i < 3; ++i)
    EXPECT_NEAR(predicted[i], rows[i].published, 0.20 * rows[i].published);
  EXPECT_GT(predicted[0], predicted[1]);
}

}  // namespace
}  // namespace loom
