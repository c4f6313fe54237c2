// Model-level properties: seeded initialisation, loss at init, gradient accumulation and full
// recompute give the same gradients as one pass without recompute.
#include "worker/gpt.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/threads.h"
#include "tests/test_util.h"

namespace loom {
namespace {

const ModelConfig kModel{/*vocab=*/67, /*max_seq=*/24, /*layers=*/2, /*heads=*/2, /*hidden=*/16};

std::unique_ptr<Gpt> Make(int64_t micro_batch, Recompute recompute) {
  auto g = Gpt::Create(kModel, {micro_batch, 24, recompute, /*vocab_chunk=*/10, /*attn_block_q=*/8,
                                  /*attn_block_k=*/16});
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  (*g)->InitWeights(99);
  return std::move(*g);
}

TEST(Gpt, InitialisationIsSeededAndScaled) {
  auto a = Make(1, Recompute::kNone), b = Make(1, Recompute::kNone);
  for (int64_t i = 0; i < a->num_params(); ++i) ASSERT_EQ(a->params()[i], b->params()[i]);
  const ParamInfo* proj = a->layout().Find("h.1.mlp.c_proj.weight");
  const ParamInfo* ln = a->layout().Find("h.0.ln_1.weight");
  ASSERT_NE(proj, nullptr);
  double ss = 0;
  for (int64_t i = 0; i < proj->numel(); ++i) ss += std::pow(a->params()[proj->offset + i], 2);
  EXPECT_NEAR(std::sqrt(ss / proj->numel()), 0.02 / std::sqrt(4.0), 0.001);
  EXPECT_EQ(a->params()[ln->offset], 1.0f);
  b->InitWeights(100);
  EXPECT_NE(a->params()[proj->offset], b->params()[proj->offset]);
}

TEST(Gpt, InitialLossIsNearLogVocab) {
  ConfigureThreads(2);
  auto g = Make(4, Recompute::kNone);
  auto in = testing::RandomTokens(4 * 24, kModel.vocab, 1), tgt = testing::RandomTokens(4 * 24, kModel.vocab, 2);
  double loss = g->ForwardLoss(in.data(), tgt.data(), 4, 24) / (4 * 24);
  EXPECT_NEAR(loss, std::log(67.0), 0.05);
}

std::vector<float> Grads(int64_t micro_batch, Recompute recompute, const std::vector<int32_t>& in,
                         const std::vector<int32_t>& tgt, int64_t global_batch, double* loss) {
  auto g = Make(micro_batch, recompute);
  g->ZeroGrads();
  *loss = 0;
  for (int64_t mb = 0; mb < global_batch / micro_batch; ++mb) {
    *loss += g->ForwardLoss(in.data() + mb * micro_batch * 24, tgt.data() + mb * micro_batch * 24,
                            micro_batch, 24);
    g->Backward(1.0f / (global_batch * 24));
  }
  return std::vector<float>(g->grads(), g->grads() + g->num_params());
}

TEST(Gpt, AccumulationAndRecomputeMatchOnePass) {
  ConfigureThreads(2);
  auto in = testing::RandomTokens(4 * 24, kModel.vocab, 3), tgt = testing::RandomTokens(4 * 24, kModel.vocab, 4);
  double l_ref, l_acc, l_rec;
  auto ref = Grads(4, Recompute::kNone, in, tgt, 4, &l_ref);
  auto acc = Grads(2, Recompute::kNone, in, tgt, 4, &l_acc);
  auto rec = Grads(4, Recompute::kFull, in, tgt, 4, &l_rec);
  EXPECT_NEAR(l_acc, l_ref, 1e-6 * std::fabs(l_ref));
  EXPECT_EQ(l_rec, l_ref);
  double max_ref = 0;
  for (float v : ref) max_ref = std::max(max_ref, double(std::fabs(v)));
  ASSERT_GT(max_ref, 0);
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(acc[i], ref[i], 1e-6 * max_ref) << i;
    ASSERT_EQ(rec[i], ref[i]) << i;  // recompute repeats the same arithmetic exactly
  }
}

TEST(Gpt, RecomputeKeepsLessActivationMemory) {
  auto none = Make(4, Recompute::kNone), full = Make(4, Recompute::kFull);
  EXPECT_LT(full->ActivationBytesPerLayer() * 10, none->ActivationBytesPerLayer());
}

TEST(Gpt, RejectsBadRuntime) {
  EXPECT_FALSE(Gpt::Create(kModel, {1, 25}).ok());  // seq > max_seq
  ModelConfig bad = kModel;
  bad.hidden = 15;
  EXPECT_FALSE(Gpt::Create(bad, {1, 8}).ok());
}

}  // namespace
}  // namespace loom
