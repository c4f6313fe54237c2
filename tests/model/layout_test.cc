// Parameter layout and buckets: contiguous buckets (embeddings, one per layer, final norm) that
// partition the flat buffer; tensor-parallel local shapes; global index mapping.
#include "parallel/param_layout.h"
#include "model/layout.h"

#include <gtest/gtest.h>

#include <set>

namespace loom {
namespace {

TEST(ParamLayout, BucketsPartitionTheBufferByLayer) {
  const ModelConfig m{/*vocab=*/50, /*max_seq=*/8, /*layers=*/3, /*heads=*/4, /*hidden=*/8};
  for (int tp : {1, 2, 4}) {
    const ParamLayout l = ModelLayout(m, tp);
    ASSERT_EQ(l.num_buckets(), 3 + 2);
    int64_t at = 0;
    for (auto [b, e] : l.buckets) {
      EXPECT_EQ(b, at);
      EXPECT_GT(e, b);
      at = e;
    }
    EXPECT_EQ(at, l.total);
    for (const ParamInfo& p : l.params) {
      const auto [b, e] = l.buckets[static_cast<size_t>(p.bucket)];
      EXPECT_EQ(p.offset, b + p.bucket_offset) << p.name;
      EXPECT_LE(p.offset + p.numel(), e) << p.name;
      EXPECT_EQ(p.bucket, p.layer >= 0 ? 1 + p.layer : (p.name.rfind("ln_f", 0) == 0 ? 4 : 0))
          << p.name;
    }
  }
}

TEST(ParamLayout, TensorParallelShapesAndGlobalIndices) {
  const ModelConfig m{/*vocab=*/50, /*max_seq=*/8, /*layers=*/1, /*heads=*/4, /*hidden=*/8};
  const ParamLayout l = ModelLayout(m, 4);
  EXPECT_EQ(l.padded_vocab, 52);
  EXPECT_EQ(l.Find("wte")->shape, (Shape{13, 8}));
  EXPECT_EQ(l.Find("h.0.attn.c_attn.weight")->shape, (Shape{6, 8}));
  EXPECT_EQ(l.Find("h.0.attn.c_proj.weight")->shape, (Shape{8, 2}));
  EXPECT_EQ(l.Find("h.0.mlp.c_fc.bias")->shape, (Shape{8}));
  EXPECT_EQ(l.Find("h.0.ln_1.weight")->shape, (Shape{8}));
  // c_attn on tp rank 1: local rows 0-1 are q rows 2-3, rows 2-3 are k rows 10-11, 4-5 v rows
  // 18-19.
  const ParamInfo* qkv = l.Find("h.0.attn.c_attn.weight");
  EXPECT_EQ(qkv->GlobalIndex(0, 1, 4), 2 * 8);
  EXPECT_EQ(qkv->GlobalIndex(2 * 8, 1, 4), 10 * 8);
  EXPECT_EQ(qkv->GlobalIndex(5 * 8 + 3, 1, 4), 19 * 8 + 3);
  // Row-parallel projection: columns 2-3 on rank 1.
  EXPECT_EQ(l.Find("h.0.attn.c_proj.weight")->GlobalIndex(1, 1, 4), 3);
  // The last vocab shard holds 11 real rows and 2 padding rows.
  const ParamInfo* wte = l.Find("wte");
  EXPECT_EQ(wte->GlobalIndex(10 * 8, 3, 4), 49 * 8);
  EXPECT_EQ(wte->GlobalIndex(11 * 8, 3, 4), -1);
  // Every global element of every tensor is covered exactly once across the shards.
  const ParamLayout full = ModelLayout(m, 1);
  for (size_t k = 0; k < l.params.size(); ++k) {
    std::multiset<int64_t> seen;
    for (int r = 0; r < 4; ++r) {
      for (int64_t i = 0; i < l.params[k].numel(); ++i) {
        const int64_t g = l.params[k].GlobalIndex(i, r, 4);
        if (g >= 0) seen.insert(g);
      }
    }
    const bool replicated = l.params[k].shard == ShardKind::kReplicated;
    EXPECT_EQ(static_cast<int64_t>(seen.size()), full.params[k].numel() * (replicated ? 4 : 1))
        << l.params[k].name;
  }
}

}  // namespace
}  // namespace loom
