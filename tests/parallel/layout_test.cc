// Layout rank math, checked on the documented 16-rank example and on a 16,384-rank world
// without any processes; validation messages name the violated constraint.
#include "parallel/layout.h"
#include "parallel/param_layout.h"

#include <gtest/gtest.h>

#include <set>

namespace loom {
namespace {

using Groups = std::vector<std::vector<int>>;

TEST(Layout, WorkedExampleFromTheHeader) {
  Layout l{.tp = 2, .cp = 1, .pp = 4, .vpp = 1, .dp = 2};
  ASSERT_EQ(l.world(), 16);
  EXPECT_EQ(l.AllGroups(GroupKind::kTensor),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(l.AllGroups(GroupKind::kData),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(l.AllGroups(GroupKind::kPipeline),
            (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(l.AllGroups(GroupKind::kContext).size(), 16u);
  EXPECT_EQ(l.AllGroups(GroupKind::kDataContext), l.AllGroups(GroupKind::kData));
  EXPECT_EQ(l.AllGroups(GroupKind::kEmbedding), (Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}}));
  EXPECT_TRUE(l.GroupOf(GroupKind::kEmbedding, 5).empty());  // a middle stage
  EXPECT_EQ(l.CoordOf(13), (Coord{1, 0, 0, 3}));
}

TEST(Layout, ContextGroupsSitBetweenTensorAndData) {
  Layout l{.tp = 2, .cp = 2, .pp = 1, .vpp = 1, .dp = 2};
  EXPECT_EQ(l.GroupOf(GroupKind::kTensor, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(l.GroupOf(GroupKind::kContext, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(l.GroupOf(GroupKind::kData, 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(l.GroupOf(GroupKind::kDataContext, 5), (std::vector<int>{1, 3, 5, 7}));
}

void ExpectPartition(const Layout& l, GroupKind kind, size_t size) {
  std::vector<int> count(static_cast<size_t>(l.world()), 0);
  for (const auto& g : l.AllGroups(kind)) {
    ASSERT_EQ(g.size(), size) << GroupKindName(kind);
    for (int r : g) ++count[static_cast<size_t>(r)];
  }
  for (int c : count) ASSERT_EQ(c, 1) << GroupKindName(kind);
}

TEST(Layout, SixteenThousandRanks) {
  Layout l{.tp = 8, .cp = 2, .pp = 16, .vpp = 2, .dp = 64};
  ASSERT_EQ(l.world(), 16384);
  for (int r = 0; r < l.world(); ++r) {
    Coord c = l.CoordOf(r);
    ASSERT_EQ(l.RankOf(c), r);
    ASSERT_LT(c.tp, 8);
    ASSERT_LT(c.pp, 16);
  }
  ExpectPartition(l, GroupKind::kTensor, 8);
  ExpectPartition(l, GroupKind::kContext, 2);
  ExpectPartition(l, GroupKind::kData, 64);
  ExpectPartition(l, GroupKind::kPipeline, 16);
  ExpectPartition(l, GroupKind::kDataContext, 128);
  // TP groups are runs of consecutive ranks (one node of 8 devices).
  for (const auto& g : l.AllGroups(GroupKind::kTensor)) {
    ASSERT_EQ(g.back() - g.front(), 7);
    ASSERT_EQ(g.front() % 8, 0);
  }
  // Members of every group agree on every coordinate except the group's own.
  auto g = l.GroupOf(GroupKind::kPipeline, 12345);
  std::set<int> tps;
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(l.CoordOf(g[i]).pp, static_cast<int>(i));
    tps.insert(l.CoordOf(g[i]).tp);
  }
  EXPECT_EQ(tps.size(), 1u);
  EXPECT_EQ(l.AllGroups(GroupKind::kEmbedding).size(), 8u * 2 * 64);
}

void ExpectInvalid(const Layout& l, int world, const LayoutConstraints& m,
                   const std::string& needle) {
  Status s = l.Validate(world, m);
  ASSERT_FALSE(s.ok()) << l.ToString();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

TEST(Layout, ValidationNamesTheConstraint) {
  LayoutConstraints m{.heads = 12,
                      .layers = 8,
                      .vocab = 257,
                      .seq = 256,
                      .hidden = 768,
                      .global_batch = 16,
                      .micro_batch = 2};
  Status ok = (Layout{.tp = 4, .cp = 2, .pp = 2, .vpp = 2, .dp = 2}).Validate(32, m);
  EXPECT_TRUE(ok.ok()) << ok.message();
  ExpectInvalid(Layout{.tp = 8}, 8, m, "model.heads (12) must be divisible by tp (8)");
  ExpectInvalid(Layout{.pp = 4, .vpp = 3}, 4, m, "model.layers (8) must be divisible by pp*vpp");
  ExpectInvalid(Layout{.cp = 3}, 3, LayoutConstraints{.seq = 100}, "divisible by 2*cp (6)");
  ExpectInvalid(Layout{.tp = 2, .dp = 2}, 8, m, "must equal the number of ranks (8)");
  ExpectInvalid(Layout{.zero = 4}, 1, m, "zero must be 0, 1, 2 or 3");
  ExpectInvalid(Layout{.pp = 1, .vpp = 2}, 1, m, "needs pp >= 2");
  ExpectInvalid(Layout{.dp = 3}, 3, m, "global_batch (16) must be divisible by dp (3)");
  ExpectInvalid(Layout{.dp = 4}, 4, LayoutConstraints{.global_batch = 8, .micro_batch = 4},
                "global_batch/dp (2) must be divisible by data.micro_batch (4)");
  ExpectInvalid(Layout{.tp = 4, .cp = 2, .sp = true}, 8, LayoutConstraints{.seq = 20},
                "the per-rank sequence seq/cp (10) must be divisible by tp (4)");
  EXPECT_EQ((Layout{.tp = 4}).PaddedVocab(257), 260);
  EXPECT_EQ((Layout{.tp = 1}).PaddedVocab(257), 257);
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// Uneven pipeline stages: the first and last chunk sizes given, the rest split evenly; every
// rule that fails is named.
TEST(Layout, ChunkLayersSplitsUnevenStages) {
  Layout l{.pp = 16};
  EXPECT_FALSE(l.ChunkLayers(126).ok());
  EXPECT_NE(l.ChunkLayers(126).status().message().find(
                "or set parallel.first_stage_layers: 7 and last_stage_layers: 7 (8 on each of the "
                "14 other chunks)"),
            std::string::npos)
      << l.ChunkLayers(126).status().message();
  l.first_stage_layers = 7;
  l.last_stage_layers = 7;
  Result<std::vector<int>> split = l.ChunkLayers(126);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_EQ(split->size(), 16u);
  EXPECT_EQ(split->front(), 7);
  EXPECT_EQ(split->back(), 7);
  for (size_t i = 1; i + 1 < split->size(); ++i) EXPECT_EQ((*split)[i], 8);
  EXPECT_TRUE(l.Validate(16, LayoutConstraints{.layers = 126}).ok());
  EXPECT_NE(l.ToString().find("first_stage_layers=7 last_stage_layers=7"), std::string::npos);
  // Only the first given: the last is one of the others.
  Layout first_only{.pp = 4};
  first_only.first_stage_layers = 2;
  EXPECT_EQ(*first_only.ChunkLayers(32), (std::vector<int>{2, 10, 10, 10}));
  // With vpp: global chunks 0 and pp*vpp - 1; rank r's local chunk k is global chunk k*pp + r.
  Layout v{.pp = 2, .vpp = 2};
  v.first_stage_layers = 1;
  v.last_stage_layers = 3;
  EXPECT_EQ(*v.ChunkLayers(8), (std::vector<int>{1, 2, 2, 3}));
  const std::vector<ChunkSpec> r0 = RankChunks(8, v, 0), r1 = RankChunks(8, v, 1);
  ASSERT_EQ(r0.size(), 2u);
  EXPECT_EQ(r0[0].first_layer, 0);
  EXPECT_EQ(r0[0].num_layers, 1);
  EXPECT_TRUE(r0[0].embedding);
  EXPECT_EQ(r0[1].first_layer, 3);  // global chunk 2
  EXPECT_EQ(r0[1].num_layers, 2);
  EXPECT_EQ(r1[0].first_layer, 1);  // global chunk 1
  EXPECT_EQ(r1[1].first_layer, 5);  // global chunk 3
  EXPECT_EQ(r1[1].num_layers, 3);
  EXPECT_TRUE(r1[1].head);
  // Rules.
  Layout bad{.pp = 4};
  bad.first_stage_layers = 5;
  bad.last_stage_layers = 6;
  EXPECT_NE(bad.ChunkLayers(32).status().message().find(
                "model.layers (32) minus first_stage_layers (5) and last_stage_layers (6) = 21 "
                "must be a positive multiple of the 2 other pipeline chunks"),
            std::string::npos);
  Layout two{.pp = 2};
  two.first_stage_layers = 3;
  two.last_stage_layers = 3;
  EXPECT_NE(two.ChunkLayers(8).status().message().find("must be 0 (there are no other stages)"),
            std::string::npos);
  Layout one{};
  one.first_stage_layers = 1;
  EXPECT_FALSE(one.ChunkLayers(4).ok());
  EXPECT_NE(one.Validate(1, LayoutConstraints{.layers = 4}).message().find("pp*vpp >= 2"),
            std::string::npos);
}

}  // namespace
}  // namespace loom
