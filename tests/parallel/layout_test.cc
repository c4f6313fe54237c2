// Layout rank math, checked on the documented 16-rank example and on a 16,384-rank world
// without any processes; validation messages name the violated constraint.
#include "parallel/layout.h"

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
