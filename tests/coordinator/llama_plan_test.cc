// The planner prices Llama-family models (issue "Llama-family models"): parameter counts that
// match the published ones exactly, per-rank shapes for grouped-query attention (KV heads split,
// then replicated beyond their number), SwiGLU widths, an untied output on the last stage, and a
// search that finds a layout for Llama 3 405B on 16,384 H100s at 8K and 131K tokens within the
// issue's search-time target.
#include <gtest/gtest.h>

#include <chrono>

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

TEST(LlamaPlan, Llama3_405BOn16384H100s) {
  Cluster cluster = LoadShippedCluster("dgx-h100.yaml");
  ASSERT_FALSE(cluster.nodes.empty());
  Node proto = cluster.nodes[0];
  cluster.nodes.clear();
  for (int i = 0; i < 2048; ++i) {
    proto.name = proto.host = "node-" + std::to_string(i);
    cluster.nodes.push_back(proto);
  }
  for (int64_t seq : {int64_t{8192}, int64_t{131072}}) {
    PlanJob job;
    job.model = Llama(126, 16384, 128, 8, 53248);
    job.model.max_seq = seq;
    job.seq = seq;
    job.global_batch = 16 * 1024 * 1024 / seq;  // 16M tokens per step, as Meta's pre-training
    job.precision = Precision::kBf16;
    job.dropout = false;
    const auto t0 = std::chrono::steady_clock::now();
    Result<SearchResult> r = SearchPlans(job, cluster, Calibration{}, 3);
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

}  // namespace
}  // namespace loom
