// Who writes what: across all ranks of a layout, every element of every tensor is written exactly
// once (for each state), vocabulary padding never, and replicated tensors' writing is spread.
#include "checkpoint/shard_plan.h"

#include <gtest/gtest.h>

#include <map>

#include "model/layout.h"
#include "tests/checkpoint/layout_helpers.h"

namespace loom {
namespace {

struct Case {
  const char* name;
  Layout layout;
};

class ShardPlanCoverage : public ::testing::TestWithParam<Case> {};

TEST_P(ShardPlanCoverage, EveryElementWrittenExactlyOnce) {
  const Layout& lay = GetParam().layout;
  // vocab 257 does not divide by tp; 8 layers allow pp 4 x vpp 2.
  const ModelConfig m{/*vocab=*/257, /*max_seq=*/16, /*layers=*/8, /*heads=*/4, /*hidden=*/8};
  const ParamLayout full = ModelLayout(m, 1);
  std::map<std::string, std::vector<int>> count;
  for (const ParamInfo& p : full.params) count[p.name].assign(static_cast<size_t>(p.numel()), 0);
  std::map<int, int64_t> per_rank;
  for (int r = 0; r < lay.world(); ++r) {
    const RankShardPlan plan = PlanRank(m, lay, r);
    for (const Piece& piece : plan.writes) {
      const ParamInfo& local = plan.layout.params[static_cast<size_t>(piece.param)];
      const ParamInfo& p = *full.Find(local.name);
      int64_t rows, cols;
      GlobalMatrix(p, &rows, &cols);
      ASSERT_TRUE(piece.region.ValidIn(rows, cols)) << local.name << " " << piece.region.ToString();
      // The local elements of the piece map onto exactly the region's elements.
      const Region& g = piece.region;
      for (int64_t i = g.flat_begin; i < g.flat_end; ++i) {
        const int64_t gi = (g.row0 + i / g.cols) * cols + g.col0 + i % g.cols;
        const int64_t li = piece.local - local.offset + (i - g.flat_begin);
        ASSERT_EQ(local.GlobalIndex(li, plan.tp_rank, lay.tp), gi) << local.name;
        ++count[local.name][static_cast<size_t>(gi)];
      }
      per_rank[r] += g.size();
    }
  }
  for (const auto& [name, c] : count) {
    for (size_t i = 0; i < c.size(); ++i) {
      ASSERT_EQ(c[i], 1) << GetParam().name << ": " << name << " element " << i;
    }
  }
  // Spread: no rank writes more than twice the fair share (plus one bucket's padding).
  int64_t total = 0, most = 0;
  for (const auto& [r, n] : per_rank) {
    total += n;
    most = std::max(most, n);
  }
  EXPECT_EQ(total, full.total);
  EXPECT_LE(most, 2 * total / lay.world() + 4096) << GetParam().name;
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ShardPlanCoverage,
    ::testing::Values(Case{"single", L(1, 1, 1, 1, 1, 0)}, Case{"tp2", L(2, 1, 1, 1, 1, 0)},
                      Case{"tp4", L(4, 1, 1, 1, 1, 0)}, Case{"dp3", L(1, 1, 1, 1, 3, 1)},
                      Case{"tp2_pp2_dp2", L(2, 1, 2, 1, 2, 1)},
                      Case{"pp4_dp2", L(1, 1, 4, 1, 2, 3)}, Case{"tp4_dp2", L(4, 1, 1, 1, 2, 2)},
                      Case{"cp2", L(1, 2, 1, 1, 1, 0)}, Case{"tp2_cp2_dp2", L(2, 2, 1, 1, 2, 3)},
                      Case{"pp2_vpp2", L(1, 1, 2, 2, 1, 0)},
                      Case{"pp4_vpp2_tp2_dp2", L(2, 1, 4, 2, 2, 1)}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ShardPlan, ReplicatedTensorsAreSpreadOverTensorRanks) {
  const ModelConfig m{64, 16, 2, 4, 8};
  Layout lay = L(4, 1, 1, 1, 1, 0);
  std::map<int, int> replicated_by_rank;
  for (int r = 0; r < 4; ++r) {
    const RankShardPlan plan = PlanRank(m, lay, r);
    for (const Piece& p : plan.writes) {
      if (plan.layout.params[static_cast<size_t>(p.param)].shard == ShardKind::kReplicated) {
        ++replicated_by_rank[r];
      }
    }
  }
  EXPECT_EQ(replicated_by_rank.size(), 4u);  // every TP rank writes some replicated tensors
}

}  // namespace
}  // namespace loom
