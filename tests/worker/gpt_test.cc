// Model-level properties: seeded initialisation (and TP shards equal to slices of it), loss at
// init, gradient accumulation and full recompute give the same gradients as one pass.
#include "worker/gpt.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/threads.h"
#include "model/layout.h"
#include "tests/test_util.h"

namespace loom {
namespace {

const ModelConfig kModel{/*vocab=*/67, /*max_seq=*/24, /*layers=*/2, /*heads=*/2, /*hidden=*/16};

struct Model {
  ParamLayout layout = ModelLayout(kModel, 1);
  std::unique_ptr<ParamStore> store;
  std::unique_ptr<Gpt> gpt;
  std::vector<float> params() {
    std::vector<float> out(static_cast<size_t>(layout.total));
    EXPECT_TRUE(store->CopyParams(out.data()).ok());
    return out;
  }
};

std::unique_ptr<Model> Make(int64_t micro_batch, Recompute recompute, uint64_t seed = 99) {
  auto m = std::make_unique<Model>();
  m->store = std::move(*MakeParamStore(m->layout, AdamWConfig{}, ParamStoreOptions{}));
  auto g = Gpt::Create(kModel,
                       {micro_batch, 24, recompute, /*vocab_chunk=*/10, /*attn_block_q=*/8,
                        /*attn_block_k=*/16},
                       m->layout, m->store.get());
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  m->gpt = std::move(*g);
  std::vector<float> init(static_cast<size_t>(m->layout.total));
  InitParams(m->layout, seed, init.data());
  EXPECT_TRUE(m->store->LoadParams(init.data()).ok());
  return m;
}

TEST(Gpt, InitialisationIsSeededAndScaled) {
  auto a = Make(1, Recompute::kNone), b = Make(1, Recompute::kNone),
       c = Make(1, Recompute::kNone, 100);
  auto pa = a->params(), pb = b->params(), pc = c->params();
  EXPECT_EQ(pa, pb);
  const ParamInfo* proj = a->layout.Find("h.1.mlp.c_proj.weight");
  const ParamInfo* ln = a->layout.Find("h.0.ln_1.weight");
  ASSERT_NE(proj, nullptr);
  double ss = 0;
  for (int64_t i = 0; i < proj->numel(); ++i) ss += std::pow(pa[proj->offset + i], 2);
  EXPECT_NEAR(std::sqrt(ss / proj->numel()), 0.02 / std::sqrt(4.0), 0.001);
  EXPECT_EQ(pa[ln->offset], 1.0f);
  EXPECT_NE(pa[proj->offset], pc[proj->offset]);
}

TEST(Gpt, TensorParallelShardsAreSlicesOfTheFullInitialisation) {
  const ParamLayout full = ModelLayout(kModel, 1);
  std::vector<float> ref(static_cast<size_t>(full.total)), rebuilt(ref.size(), -7.f);
  InitParams(full, 5, ref.data());
  const int tp = 2;
  const ParamLayout shard = ModelLayout(kModel, tp);
  EXPECT_EQ(shard.padded_vocab, 68);  // 67 rounded up to a multiple of 2
  for (int r = 0; r < tp; ++r) {
    std::vector<float> local(static_cast<size_t>(shard.total));
    InitParams(shard, 5, local.data(), r);
    ScatterToFull(shard, local.data(), r, full, rebuilt.data());
  }
  EXPECT_EQ(rebuilt, ref);
  const ParamInfo* qkv = shard.Find("h.0.attn.c_attn.weight");
  EXPECT_EQ(qkv->shape, (Shape{24, 16}));  // q|k|v of one head each: 3 * 8 rows
}

TEST(Gpt, InitialLossIsNearLogVocab) {
  ConfigureThreads(2);
  auto m = Make(4, Recompute::kNone);
  auto in = testing::RandomTokens(4 * 24, kModel.vocab, 1),
       tgt = testing::RandomTokens(4 * 24, kModel.vocab, 2);
  auto loss = m->gpt->ForwardLoss(in.data(), tgt.data(), 4, 24);
  ASSERT_TRUE(loss.ok());
  EXPECT_NEAR(*loss / (4 * 24), std::log(67.0), 0.05);
}

std::vector<float> Grads(int64_t micro_batch, Recompute recompute, const std::vector<int32_t>& in,
                         const std::vector<int32_t>& tgt, int64_t global_batch, double* loss) {
  auto m = Make(micro_batch, recompute);
  EXPECT_TRUE(m->store->BeginStep().ok());
  *loss = 0;
  const int64_t mbs = global_batch / micro_batch;
  for (int64_t mb = 0; mb < mbs; ++mb) {
    auto l = m->gpt->ForwardLoss(in.data() + mb * micro_batch * 24,
                                 tgt.data() + mb * micro_batch * 24, micro_batch, 24);
    EXPECT_TRUE(l.ok());
    *loss += *l;
    EXPECT_TRUE(m->gpt->Backward(1.0f / (global_batch * 24), mb + 1 == mbs).ok());
  }
  std::vector<float> g(static_cast<size_t>(m->layout.total));
  EXPECT_TRUE(m->store->CopyGrads(g.data()).ok());
  return g;
}

TEST(Gpt, AccumulationAndRecomputeMatchOnePass) {
  ConfigureThreads(2);
  auto in = testing::RandomTokens(4 * 24, kModel.vocab, 3),
       tgt = testing::RandomTokens(4 * 24, kModel.vocab, 4);
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
  EXPECT_LT(full->gpt->ActivationBytesPerLayer() * 10, none->gpt->ActivationBytesPerLayer());
}

TEST(Gpt, RejectsBadRuntime) {
  const ParamLayout layout = ModelLayout(kModel, 1);
  auto store = std::move(*MakeParamStore(layout, AdamWConfig{}, ParamStoreOptions{}));
  EXPECT_FALSE(Gpt::Create(kModel, {1, 25}, layout, store.get()).ok());  // seq > max_seq
  ModelConfig bad = kModel;
  bad.hidden = 15;
  EXPECT_FALSE(Gpt::Create(bad, {1, 8}, layout, store.get()).ok());
}

}  // namespace
}  // namespace loom
