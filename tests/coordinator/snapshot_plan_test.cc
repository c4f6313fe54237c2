// The snapshot plan of a launch: the default code from the failure domains the job's nodes span,
// stripe groups of lanes across nodes, an explicit code that does not fit refused by the
// section, a default that does not fit falling back to node-local snapshots.
#include "coordinator/snapshot_plan.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

// `nodes` nodes of `per` devices (racks: `racks` of them, 0: none), ranks placed in order.
Cluster Nodes(int nodes, int per, int racks = 0) {
  Cluster c;
  c.name = "test";
  c.types.push_back(DeviceType{});
  for (int i = 0; i < nodes; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.host = "localhost";
    n.devices = per;
    if (racks > 0) n.rack = "r" + std::to_string(i % racks);
    c.nodes.push_back(n);
  }
  return c;
}

std::vector<int> RankNodes(int nodes, int per) {
  std::vector<int> out;
  for (int n = 0; n < nodes; ++n) {
    for (int r = 0; r < per; ++r) out.push_back(n);
  }
  return out;
}

TEST(SnapshotPlan, DefaultCodeFromTheNodes) {
  for (auto [nodes, k, m] : {std::tuple{1, 1, 0}, {2, 1, 1}, {4, 2, 1}, {6, 4, 2}, {8, 4, 2}}) {
    Result<proto::SnapshotPlan> p =
        PlanSnapshots(SnapshotConfig{}, Nodes(nodes, 2), RankNodes(nodes, 2), "job", "j.yaml");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->k(), k) << nodes << " nodes";
    EXPECT_EQ(p->m(), m) << nodes << " nodes";
    EXPECT_EQ(p->every(), 1);
    EXPECT_EQ(p->rank_node_size(), 2 * nodes);
    EXPECT_EQ(p->groups_size(), m > 0 ? 2 : 0);  // one group, two lanes
  }
}

TEST(SnapshotPlan, GroupsAreLanesAndTheDescriptionSaysWhatIsSurvived) {
  SnapshotConfig c;
  c.every = 4;
  Result<proto::SnapshotPlan> p = PlanSnapshots(c, Nodes(4, 2), RankNodes(4, 2), "job", "j.yaml");
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->groups_size(), 2);
  EXPECT_EQ(std::vector<int>(p->groups(0).ranks().begin(), p->groups(0).ranks().end()),
            (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(p->rank_node(5), "n2");
  EXPECT_EQ(DescribeSnapshots(*p),
            "every 4 steps, RS(2,1) over 4 nodes in 2 stripe groups (state + 50% parity in "
            "memory; survives 1 lost node per group)");
}

TEST(SnapshotPlan, RacksAreTheDomains) {
  // 6 nodes in 2 racks: 2 domains, a mirror by default, each row across the racks.
  Result<proto::SnapshotPlan> p =
      PlanSnapshots(SnapshotConfig{}, Nodes(6, 1, 2), RankNodes(6, 1), "job", "j.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->k(), 1);
  EXPECT_EQ(p->m(), 1);
}

TEST(SnapshotPlan, AnExplicitCodeThatDoesNotFitIsRefusedByTheSection) {
  SnapshotConfig c;
  c.k = 4;
  c.m = 2;
  Result<proto::SnapshotPlan> p = PlanSnapshots(c, Nodes(4, 2), RankNodes(4, 2), "job", "j.yaml");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("j.yaml: section 'snapshot' (RS(4,2))"), std::string::npos)
      << p.status().message();
  EXPECT_NE(p.status().message().find("needs at least 6 nodes"), std::string::npos);
  c.k.reset();
  c.m = 0;  // node-local on purpose
  Result<proto::SnapshotPlan> local =
      PlanSnapshots(c, Nodes(4, 2), RankNodes(4, 2), "job", "j.yaml");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->m(), 0);
  EXPECT_NE(DescribeSnapshots(*local).find("node-local on 4 nodes"), std::string::npos);
}

TEST(SnapshotPlan, ADefaultThatDoesNotFitFallsBackToNodeLocal) {
  Cluster c = Nodes(3, 2);
  std::vector<int> ranks = {0, 0, 1, 1, 2};  // node 2 runs one rank: lanes do not line up
  std::string note;
  Result<proto::SnapshotPlan> p = PlanSnapshots(SnapshotConfig{}, c, ranks, "job", "j.yaml", &note);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->m(), 0);
  EXPECT_NE(note.find("as many ranks each"), std::string::npos) << note;
}

}  // namespace
}  // namespace loom
