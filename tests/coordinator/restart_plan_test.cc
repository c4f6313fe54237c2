// Where a failed job restarts: the same nodes, spares for lost ones (with room for their ranks),
// or the survivors to replan on.
#include "coordinator/restart_plan.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

Cluster Nodes(int nodes, std::vector<int> spares = {}, int per = 2) {
  Cluster c;
  c.types.push_back(DeviceType{});
  for (int i = 0; i < nodes; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.devices = per;
    c.nodes.push_back(n);
  }
  for (int s : spares) c.nodes[static_cast<size_t>(s)].spare = true;
  return c;
}

TEST(RestartPlan, NothingLostRestartsInPlace) {
  Result<RestartPlacement> p = PlaceRestart(Nodes(4), {2, 2, 2, 2}, {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, RestartPlacement::Kind::kSame);
  EXPECT_EQ(p->node_map, (std::vector<int>{0, 1, 2, 3}));
  // A lost node that ran nothing changes nothing either (it is just excluded).
  Result<RestartPlacement> idle = PlaceRestart(Nodes(5), {2, 2, 2, 2, 0}, {4});
  ASSERT_TRUE(idle.ok());
  EXPECT_EQ(idle->kind, RestartPlacement::Kind::kSame);
  EXPECT_TRUE(idle->cluster.nodes[4].excluded);
}

TEST(RestartPlan, ASpareTakesALostNodesRanks) {
  Result<RestartPlacement> p = PlaceRestart(Nodes(5, {4}), {2, 2, 2, 2, 0}, {1});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, RestartPlacement::Kind::kSpares);
  EXPECT_EQ(p->node_map[1], 4);
  EXPECT_TRUE(p->cluster.nodes[1].excluded);
  EXPECT_FALSE(p->cluster.nodes[4].spare);
  EXPECT_EQ(p->summary, "node n1 lost: spare n4 for n1");
}

TEST(RestartPlan, WithoutEnoughSparesTheSurvivorsAreReplanned) {
  Result<RestartPlacement> p = PlaceRestart(Nodes(5, {4}), {2, 2, 2, 2, 0}, {1, 2});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, RestartPlacement::Kind::kReplan);
  EXPECT_EQ(p->cluster.UsableNodes(), (std::vector<int>{0, 3}));
  EXPECT_NE(p->summary.find("not enough spares: replanned on 2 surviving nodes"), std::string::npos)
      << p->summary;
  // A spare too small for the lost node's ranks is no replacement.
  Cluster small = Nodes(5, {4});
  small.nodes[4].devices = 1;
  Result<RestartPlacement> q = PlaceRestart(small, {2, 2, 2, 2, 0}, {0});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->kind, RestartPlacement::Kind::kReplan);
}

TEST(RestartPlan, NoNodeLeftIsAnError) {
  Result<RestartPlacement> p = PlaceRestart(Nodes(2), {2, 2}, {0, 1});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("nodes n0, n1 lost and no node is left"), std::string::npos);
}

}  // namespace
}  // namespace loom
