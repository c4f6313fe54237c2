// Where ranks run: hosts and slots per used node, and the cores of a host split between the CPU
// ranks on it (core/affinity.h).
#include "coordinator/service/launch_plan.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

Cluster Logical(bool shared_cores) {
  Cluster c;
  c.name = "test";
  DeviceType t;
  t.name = shared_cores ? "cpu-core" : "gpu";
  t.shared_cores = shared_cores;
  c.types.push_back(t);
  for (int i = 0; i < 4; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.host = i < 3 ? "box" : "other";  // three logical nodes on box, one machine of its own
    n.devices = 2;
    c.nodes.push_back(n);
  }
  return c;
}

TEST(SetHosts, CpuRanksOfOneHostSplitItsCoresInNodeOrder) {
  const Cluster c = Logical(true);
  LaunchPlan p;
  p.spec.node = {2, 2, 0, 0, 3, 3};  // node 1 unused: two logical nodes on box
  p.spec.device = {0, 1, 0, 1, 0, 1};
  SetHosts(c, &p);
  EXPECT_EQ(p.hosts, (std::vector<std::string>{"box", "box", "other"}));
  EXPECT_EQ(p.slots, (std::vector<int>{2, 2, 2}));
  // On box: n0's ranks take shares 0 and 1, n2's 2 and 3; on other, n3's two ranks 0 and 1.
  EXPECT_EQ(p.spec.core_share, (std::vector<int>{2, 3, 0, 1, 0, 1}));
  EXPECT_EQ(p.spec.core_shares, (std::vector<int>{4, 4, 4, 4, 2, 2}));
  // After a restart onto the spare n1 the shares are recomputed.
  p.spec.node = {1, 1, 0, 0, 2, 2};
  SetHosts(c, &p);
  EXPECT_EQ(p.spec.core_share, (std::vector<int>{2, 3, 0, 1, 4, 5}));
  EXPECT_EQ(p.spec.core_shares, (std::vector<int>{6, 6, 6, 6, 6, 6}));
}

TEST(SetHosts, AcceleratorsAndLoneRanksAreNotSplit) {
  LaunchPlan p;
  p.spec.node = {0, 0, 1, 1};
  p.spec.device = {0, 1, 0, 1};
  SetHosts(Logical(false), &p);  // GPUs: each rank has its own device
  EXPECT_EQ(p.spec.core_shares, (std::vector<int>{0, 0, 0, 0}));
  p.spec.node = {0, 3};
  p.spec.device = {0, 0};
  SetHosts(Logical(true), &p);  // one rank on each host
  EXPECT_EQ(p.spec.core_shares, (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace loom
