// How a job ended, from its ranks' status: failure lines, the silent ranks named (at most 8),
// the ranks furthest behind, and a stop every rank agreed on.
#include "coordinator/supervisor/outcome.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

std::vector<RankStatus> Ranks(int n, int64_t step = 5) {
  std::vector<RankStatus> out(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    out[static_cast<size_t>(r)].registered = true;
    out[static_cast<size_t>(r)].host = "node" + std::to_string(r / 4);
    out[static_cast<size_t>(r)].pid = 100 + r;
    out[static_cast<size_t>(r)].step = step;
  }
  return out;
}

TEST(Outcome, NothingToSayWhenEveryRankFinishedWell) {
  std::vector<RankStatus> ranks = Ranks(3);
  for (RankStatus& r : ranks) r.done = r.ok = true;
  EXPECT_EQ(DescribeFailure(ranks), "");
}

TEST(Outcome, FailedRanksSayWhenAndWhy) {
  std::vector<RankStatus> ranks = Ranks(2);
  for (RankStatus& r : ranks) r.done = true;
  ranks[0].ok = true;
  ranks[1].error = "loss is nan at step 6";
  EXPECT_EQ(DescribeFailure(ranks),
            "\n  rank 1 (node0, pid 101) failed after step 5: loss is nan at step 6");
  ranks[1].step = 0;
  EXPECT_EQ(DescribeFailure(ranks),
            "\n  rank 1 (node0, pid 101) failed before its first step: loss is nan at step 6");
}

TEST(Outcome, AtMostEightSilentRanksAreNamed) {
  std::vector<RankStatus> ranks = Ranks(12);
  ranks[0].done = ranks[0].ok = true;
  EXPECT_EQ(DescribeFailure(ranks),
            "\n  ranks 1, 2, 3, 4, 5, 6, 7, 8 and 3 more ended without reporting (hung or "
            "killed, or stopped by the others' failure)");
  std::vector<RankStatus> one = Ranks(2);
  one[1].done = one[1].ok = true;
  EXPECT_EQ(DescribeFailure(one),
            "\n  rank 0 ended without reporting (hung or killed, or stopped by the others' "
            "failure)");
}

TEST(Outcome, TheRanksFurthestBehindAreNamed) {
  std::vector<RankStatus> ranks = Ranks(6);
  ranks[1].step = 3;
  ranks[4].step = 3;
  ranks[5].step = 4;
  EXPECT_EQ(Laggards(ranks), (std::vector<int>{1, 4}));
  EXPECT_EQ(DescribeLaggards(ranks),
            "; furthest behind at step 3: rank 1 (node0, pid 101), 4 (node1, pid 104)");
}

TEST(Outcome, AStopCountsOnlyWhenEveryRankStoppedAfterTheSameStep) {
  std::vector<RankStatus> ranks = Ranks(3, 40);
  int64_t step = -1;
  EXPECT_EQ(StoppedBySignal(ranks, &step), 0);  // none stopped
  for (RankStatus& r : ranks) {
    r.done = true;
    r.stopped_by = 10;
  }
  EXPECT_EQ(StoppedBySignal(ranks, &step), 10);
  EXPECT_EQ(step, 40);
  ranks[2].step = 41;
  EXPECT_EQ(StoppedBySignal(ranks, &step), 0);  // another step
  ranks[2].step = 40;
  ranks[2].stopped_by = 12;
  EXPECT_EQ(StoppedBySignal(ranks, &step), 0);  // another signal
  ranks[2].stopped_by = 10;
  ranks[2].done = false;
  EXPECT_EQ(StoppedBySignal(ranks, &step), 0);  // one still running
  EXPECT_EQ(StoppedBySignal({}, &step), 0);
}

}  // namespace
}  // namespace loom
