// Rank placement: ranks fill nodes in order, excluded and odd nodes are left out, slow measured
// links are kept out of rings, and each group shape gets the right link.
#include <gtest/gtest.h>

#include "coordinator/planner/placement.h"
#include "tests/coordinator/planner_test_util.h"

namespace loom {
namespace {

Cluster FourNodes() {
  Cluster c;
  c.name = "four";
  DeviceType gpu;
  gpu.name = "gpu";
  gpu.memory = 80e9;
  gpu.peak_fp32 = gpu.peak_bf16 = 1e14;
  gpu.memory_bandwidth = 2e12;
  c.types.push_back(gpu);
  for (int i = 0; i < 4; ++i)
    c.nodes.push_back({"n" + std::to_string(i), "", 8, 0, false, "", false});
  c.intra = {300e9, 3e-6};
  c.inter = {200e9, 5e-6};
  return c;
}

Hardware Nominal(const Cluster& c) {
  Calibration cal;
  cal.link_efficiency = 1;
  return MakeHardware(c, 0, cal, Precision::kBf16, 1);
}

TEST(Placement, RanksFillNodesInOrder) {
  Cluster c = FourNodes();
  Result<RankPlacement> p = PlaceRanks(c, NodePool(c, nullptr), 32);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ranks_per_node, 8);
  EXPECT_EQ(p->NodeOf(0), 0);
  EXPECT_EQ(p->NodeOf(7), 0);
  EXPECT_EQ(p->NodeOf(8), 1);
  EXPECT_EQ(p->DeviceOf(13), 5);
  EXPECT_FALSE(PlaceRanks(c, NodePool(c, nullptr), 33).ok());
}

TEST(Placement, ExcludedNodesAreNeverUsed) {
  Cluster c = FourNodes();
  c.nodes[1].excluded = true;
  const std::vector<int> pool = NodePool(c, nullptr);
  EXPECT_EQ(pool, (std::vector<int>{0, 2, 3}));
  Result<RankPlacement> p = PlaceRanks(c, pool, 24);
  ASSERT_TRUE(p.ok());
  for (int r = 0; r < 24; ++r) EXPECT_NE(p->NodeOf(r), 1) << r;
  EXPECT_FALSE(PlaceRanks(c, pool, 32).ok());
}

TEST(Placement, LargestPoolOfIdenticalNodes) {
  Cluster c = FourNodes();
  c.nodes.push_back({"small", "", 4, 0, false, "", false});
  std::string note;
  EXPECT_EQ(NodePool(c, &note), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_NE(note.find("largest pool"), std::string::npos) << note;
}

TEST(Placement, SharedCpuCores) {
  Cluster local = LoadShippedCluster("localhost.yaml");
  Result<RankPlacement> one = PlaceRanks(local, NodePool(local, nullptr), 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->devices_per_rank, 2);  // one rank uses both cores
  Result<RankPlacement> two = PlaceRanks(local, NodePool(local, nullptr), 2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->devices_per_rank, 1);
  EXPECT_EQ(two->DeviceOf(1), 1);
}

TEST(Placement, RepeatedCalibrationsCountByTheirMedian) {
  Cluster local = LoadShippedCluster("localhost.yaml");
  Calibration cal;
  // Three merged runs of loom calibrate; the second ran while the VM was slow.
  for (double gflops : {180, 100, 170}) {
    cal.gemm.push_back({512, 1024, 256, 2, gflops * 1e9});
    cal.memory.push_back({2, gflops * 1e8});
  }
  cal.gemm.push_back({512, 1024, 256, 1, 95e9});  // another thread count
  const Hardware two = MakeHardware(local, 0, cal, Precision::kFp32, 2);
  ASSERT_EQ(two.gemm.size(), 1u);
  EXPECT_DOUBLE_EQ(two.gemm[0].flops, 170e9);
  EXPECT_DOUBLE_EQ(two.memory_bandwidth, 17e9);
  const Hardware one = MakeHardware(local, 0, cal, Precision::kFp32, 1);
  ASSERT_EQ(one.gemm.size(), 1u);
  EXPECT_DOUBLE_EQ(one.gemm[0].flops, 95e9);
}

// Ranks time-sharing cores compute at their share of a core times what the sharing leaves them
// (the calibration's time_sharing for the plan's rank count, the median of repeats).
TEST(Placement, TimeSharedCoresLoseWhatTheCalibrationMeasured) {
  Cluster local = LoadShippedCluster("localhost.yaml");  // 2 ranks
  Calibration cal;
  cal.gemm.push_back({512, 1024, 256, 1, 100e9});
  cal.optimizer.push_back({1, 8e9});
  for (double e : {0.9, 0.8, 0.85}) cal.time_sharing.push_back({2, 1, e});
  cal.time_sharing.push_back({4, 2, 0.5});  // more ranks than the plan's
  const Hardware own = MakeHardware(local, 0, cal, Precision::kFp32, 1);
  EXPECT_DOUBLE_EQ(own.time_sharing, 1);  // a core each: nothing shared
  EXPECT_DOUBLE_EQ(own.gemm[0].flops, 100e9);
  local.types[0].core_share = 0.5;
  const Hardware shared = MakeHardware(local, 0, cal, Precision::kFp32, 1);
  EXPECT_DOUBLE_EQ(shared.time_sharing, 0.85);
  EXPECT_DOUBLE_EQ(shared.gemm[0].flops, 100e9 * 0.5 * 0.85);
  EXPECT_DOUBLE_EQ(shared.optimizer_bandwidth, 8e9 * 0.5 * 0.85);
  cal.time_sharing.clear();  // not measured: the core share alone
  EXPECT_DOUBLE_EQ(MakeHardware(local, 0, cal, Precision::kFp32, 1).gemm[0].flops, 50e9);
}

// The calibration's wait per synchronisation, measured with all ranks of a run: a plan takes
// the figure of its own rank count (the most ranks not above it), and every group path has it.
TEST(Placement, SyncWaitOfThePlansRankCount) {
  Cluster c = FourNodes();  // 32 devices
  Calibration cal;
  cal.collectives.push_back({"sync_wait", 2, 4096, 1e-5});
  cal.collectives.push_back({"sync_wait", 16, 4096, 3e-4});
  cal.collectives.push_back({"sync_wait", 16, 4096, 1e-4});
  cal.collectives.push_back({"sync_wait", 16, 4096, 2e-4});  // repeats: the median
  cal.collectives.push_back({"sync_wait", 64, 4096, 9e-3});  // more ranks than the cluster's
  const Hardware hw = MakeHardware(c, 0, cal, Precision::kBf16, 1);
  EXPECT_DOUBLE_EQ(hw.sync_wait, 2e-4);
  EXPECT_DOUBLE_EQ(MakeHardware(c, 0, Calibration{}, Precision::kBf16, 1).sync_wait, 0);
  c.nodes.resize(1);  // 8 ranks: only the two-rank figure is not above
  EXPECT_DOUBLE_EQ(MakeHardware(c, 0, cal, Precision::kBf16, 1).sync_wait, 1e-5);
  Result<RankPlacement> p = PlaceRanks(c, NodePool(c, nullptr), 8);
  ASSERT_TRUE(p.ok());
  const Hardware one_node = MakeHardware(c, 0, cal, Precision::kBf16, 1);
  PathCache paths(c, *p, one_node);
  EXPECT_DOUBLE_EQ(paths.Ring(1, 8).sync_wait, 1e-5);
  EXPECT_DOUBLE_EQ(paths.Hop(2, 4).sync_wait, 1e-5);
}

TEST(Placement, GroupPaths) {
  Cluster c = FourNodes();
  const Hardware hw = Nominal(c);
  Result<RankPlacement> p = PlaceRanks(c, NodePool(c, nullptr), 32);
  ASSERT_TRUE(p.ok());
  PathCache paths(c, *p, hw);
  // Tensor-parallel group of 8 inside a node: NVLink.
  GroupPath tp = paths.Ring(1, 8);
  EXPECT_EQ(tp.nodes, 1);
  EXPECT_DOUBLE_EQ(tp.bandwidth, 300e9);
  // Data-parallel ring with tp = 8: one member per node; the node's network is shared by the 8
  // rings (one per tensor-parallel rank).
  GroupPath dp = paths.Ring(8, 4);
  EXPECT_EQ(dp.nodes, 4);
  EXPECT_DOUBLE_EQ(dp.bandwidth, 200e9 / 8);
  EXPECT_DOUBLE_EQ(dp.latency, 5e-6);
  // Pure data parallelism over all 32: eight members per node, one ring uses the whole network.
  EXPECT_DOUBLE_EQ(paths.Ring(1, 32).bandwidth, 200e9);
  // tp = 2: four members of each data-parallel ring per node, two rings per node; each ring
  // enters a node once per channel and forwards over NVLink, so it gets half the network.
  EXPECT_DOUBLE_EQ(paths.Ring(2, 16).bandwidth, 200e9 / 2);
  EXPECT_EQ(paths.Ring(2, 16).nodes, 4);
  // Pipeline hops between nodes: every rank of a node sends at once.
  EXPECT_DOUBLE_EQ(paths.Hop(8, 4).bandwidth, 200e9 / 8);
  // Hops inside a node.
  EXPECT_DOUBLE_EQ(paths.Hop(2, 4).bandwidth, 300e9);
}

TEST(Placement, MeasuredCollectivesPriceGroupsInsideANode) {
  Cluster c = FourNodes();
  Hardware hw = Nominal(c);
  hw.collectives.Add(CollOp::kAllReduce, 8, 1e6, 1e-3);
  hw.collectives.Add(CollOp::kSendRecv, 2, 1e6, 1e-4);
  Result<RankPlacement> p = PlaceRanks(c, NodePool(c, nullptr), 32);
  ASSERT_TRUE(p.ok());
  PathCache paths(c, *p, hw);
  EXPECT_EQ(paths.Ring(1, 8).measured, &hw.collectives);  // inside a node, size measured
  EXPECT_EQ(paths.Ring(1, 4).measured, nullptr);          // size 4 was not measured
  EXPECT_EQ(paths.Ring(8, 4).measured, nullptr);          // across nodes: the network's figures
  EXPECT_EQ(paths.Hop(2, 4).measured, &hw.collectives);   // hops inside a node: two ranks
  EXPECT_EQ(paths.Hop(8, 4).measured, nullptr);
}

TEST(Placement, SlowMeasuredLinksAreAvoided) {
  Cluster c = FourNodes();
  // n0 <-> n1 is slow (a bad cable); every other pair is healthy.
  c.measured_bandwidth.assign(4, std::vector<double>(4, 190e9));
  c.measured_latency.assign(4, std::vector<double>(4, 0));
  c.measured_bandwidth[0][1] = c.measured_bandwidth[1][0] = 10e9;
  const std::vector<int> chain = NodePool(c, nullptr);
  ASSERT_EQ(chain.size(), 4u);
  for (size_t i = 0; i + 1 < chain.size(); ++i) {
    EXPECT_FALSE((chain[i] == 0 && chain[i + 1] == 1) || (chain[i] == 1 && chain[i + 1] == 0))
        << "slow pair placed side by side";
  }
  // Two-node groups along the chain (pipeline hops, dp = 2) never cross the slow pair; in
  // manifest order they would.
  const Hardware hw = Nominal(c);
  Result<RankPlacement> chained = PlaceRanks(c, chain, 32);
  Result<RankPlacement> naive = PlaceRanks(c, {0, 1, 2, 3}, 32);
  ASSERT_TRUE(chained.ok() && naive.ok());
  PathCache good(c, *chained, hw), bad(c, *naive, hw);
  EXPECT_DOUBLE_EQ(bad.Ring(8, 2).bandwidth, 10e9 / 8);
  EXPECT_GT(good.Ring(8, 2).bandwidth, bad.Ring(8, 2).bandwidth);
}

}  // namespace
}  // namespace loom
