// Stripe rows and groups: every row's fragments on distinct members, every member contributing
// each piece once and holding m parities; the worked example of the header; groups across nodes
// and racks; placements that would put two fragments of a stripe in one domain are refused.
#include "fault/snapshot/stripe.h"

#include <gtest/gtest.h>

#include <set>

namespace loom {
namespace {

TEST(StripeLayout, RowsUseDistinctMembersAndEveryPieceOnce) {
  for (int k = 1; k <= 6; ++k) {
    for (int m = 1; m <= 3; ++m) {
      for (int n = k + m; n <= k + m + 4; ++n) {
        Result<StripeLayout> s = StripeLayout::Create(n, k, m);
        ASSERT_TRUE(s.ok());
        std::vector<int> pieces(static_cast<size_t>(n)), parities(static_cast<size_t>(n));
        for (int r = 0; r < n; ++r) {
          const std::vector<int> h = s->RowHolders(r);
          EXPECT_EQ(std::set<int>(h.begin(), h.end()).size(), static_cast<size_t>(k + m));
          EXPECT_EQ(s->ParityMember(r, 0), r);  // member r gathers row r
          for (int t = 0; t < k; ++t) {
            ++pieces[h[t]];
            EXPECT_EQ(s->RowOfPiece(h[t], t), r);
          }
          for (int p = 0; p < m; ++p) {
            ++parities[h[k + p]];
            EXPECT_EQ(s->RowOfParity(h[k + p], p), r);
          }
        }
        for (int j = 0; j < n; ++j) {
          EXPECT_EQ(pieces[j], k) << "member " << j;
          EXPECT_EQ(parities[j], m) << "member " << j;
        }
      }
    }
  }
}

TEST(StripeLayout, WorkedExampleOfTheHeader) {
  Result<StripeLayout> s = StripeLayout::Create(4, 2, 1);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->RowHolders(0), (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(s->RowHolders(1), (std::vector<int>{2, 3, 1}));
  EXPECT_EQ(s->RowHolders(2), (std::vector<int>{3, 0, 2}));
  EXPECT_EQ(s->RowHolders(3), (std::vector<int>{0, 1, 3}));
}

TEST(StripeLayout, TooFewMembersIsRefused) {
  EXPECT_FALSE(StripeLayout::Create(3, 2, 2).ok());
  EXPECT_FALSE(StripeLayout::Create(3, 0, 1).ok());
  EXPECT_TRUE(StripeLayout::Create(4, 2, 2).ok());
}

TEST(Stripe, PieceBytesCoverTheLargestImage) {
  EXPECT_EQ(PieceBytes(1000, 3), 384u);  // ceil(1000 / 3) = 334 -> 384
  EXPECT_EQ(PieceBytes(0, 2), 64u);
  EXPECT_EQ(PieceBytes(4096 * 4, 4, 4096), 4096u);
}

TEST(Stripe, DefaultCodes) {
  EXPECT_EQ(DefaultErasureCode(1).ToString(), "none");
  EXPECT_EQ(DefaultErasureCode(2).ToString(), "RS(1,1)");
  EXPECT_EQ(DefaultErasureCode(3).ToString(), "RS(2,1)");
  EXPECT_EQ(DefaultErasureCode(5).ToString(), "RS(2,1)");
  EXPECT_EQ(DefaultErasureCode(6).ToString(), "RS(4,2)");
  EXPECT_EQ(DefaultErasureCode(100).ToString(), "RS(4,2)");
}

std::vector<StripeNode> Nodes(int count, int ranks, int racks) {
  std::vector<StripeNode> out;
  for (int i = 0; i < count; ++i) {
    StripeNode n;
    n.name = "n" + std::to_string(i);
    n.domain = racks > 0 ? "rack" + std::to_string(i * racks / count) : n.name;
    for (int r = 0; r < ranks; ++r) n.ranks.push_back(i * ranks + r);
    out.push_back(n);
  }
  return out;
}

TEST(Stripe, GroupsAreLanesAcrossNodes) {
  // 8 ranks on 4 nodes, RS(2,1): one group of 4 nodes, two lanes.
  Result<std::vector<StripeGroup>> g = FormStripeGroups(Nodes(4, 2, 0), {2, 1});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->size(), 2u);
  EXPECT_EQ((*g)[0].ranks, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ((*g)[1].ranks, (std::vector<int>{1, 3, 5, 7}));
  // 13 nodes, RS(4,2): two groups (7 + 6 nodes), every rank in exactly one.
  Result<std::vector<StripeGroup>> big = FormStripeGroups(Nodes(13, 8, 0), {4, 2});
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  ASSERT_EQ(big->size(), 16u);
  std::set<int> seen;
  for (const StripeGroup& sg : *big) {
    EXPECT_GE(sg.ranks.size(), 6u);
    for (int r : sg.ranks) EXPECT_TRUE(seen.insert(r).second);
  }
  EXPECT_EQ(seen.size(), 13u * 8u);
}

TEST(Stripe, RacksAreFailureDomains) {
  // 6 nodes in 3 racks, RS(2,1): two groups, each with one node per rack.
  Result<std::vector<StripeGroup>> g = FormStripeGroups(Nodes(6, 1, 3), {2, 1});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (const StripeGroup& sg : *g) {
    EXPECT_EQ(std::set<std::string>(sg.domains.begin(), sg.domains.end()).size(), 3u);
  }
  // 4 nodes in 2 racks cannot take RS(2,1): a rack holds two fragments of some row.
  Result<std::vector<StripeGroup>> bad = FormStripeGroups(Nodes(4, 1, 2), {2, 1});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("both in failure domain rack"), std::string::npos)
      << bad.status().message();
  // ... but a mirror, RS(1,1), fits (rows of two consecutive nodes alternate racks).
  EXPECT_TRUE(FormStripeGroups(Nodes(4, 1, 2), {1, 1}).ok());
}

TEST(Stripe, PlacementCheckNamesTheTwoFragments) {
  StripeGroup g;
  g.ranks = {0, 1, 2};
  g.nodes = {"a", "b", "a"};
  g.domains = {"a", "b", "a"};
  Status st = CheckStripePlacement(g, {2, 1}, 5);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("stripe group 5, row 0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("node a"), std::string::npos) << st.message();
}

TEST(Stripe, TooFewNodesOrUnequalNodesAreRefused) {
  Result<std::vector<StripeGroup>> few = FormStripeGroups(Nodes(5, 1, 0), {4, 2});
  ASSERT_FALSE(few.ok());
  EXPECT_NE(few.status().message().find("needs at least 6 nodes"), std::string::npos);
  std::vector<StripeNode> nodes = Nodes(3, 2, 0);
  nodes[1].ranks.pop_back();
  Result<std::vector<StripeGroup>> uneq = FormStripeGroups(nodes, {2, 1});
  ASSERT_FALSE(uneq.ok());
  EXPECT_NE(uneq.status().message().find("as many ranks each"), std::string::npos);
}

}  // namespace
}  // namespace loom
