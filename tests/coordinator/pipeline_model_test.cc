// The memoised, extrapolated pipeline model against full simulations.
#include <gtest/gtest.h>

#include "coordinator/planner/pipeline_model.h"

namespace loom {
namespace {

struct Case {
  ScheduleKind kind;
  int pp, vpp, micro;
  double forward, backward, transfer;
};

TEST(PipelineModel, ExtrapolationMatchesFullSimulation) {
  PipelineModel model;
  for (const Case& c : {
           Case{ScheduleKind::k1F1B, 4, 1, 64, 1.0, 2.0, 0.0},
           Case{ScheduleKind::k1F1B, 8, 1, 100, 0.7, 2.1, 0.05},
           Case{ScheduleKind::k1F1B, 16, 1, 257, 1.0, 3.0, 0.3},
           Case{ScheduleKind::kInterleaved, 4, 2, 64, 1.0, 2.0, 0.0},
           Case{ScheduleKind::kInterleaved, 8, 2, 96, 0.5, 1.5, 0.02},
           Case{ScheduleKind::kInterleaved, 8, 5, 96, 0.2, 0.8, 0.01},
           Case{ScheduleKind::kInterleaved, 16, 4, 160, 1.0, 3.0, 0.4},
           Case{ScheduleKind::kGPipe, 4, 1, 40, 1.0, 2.0, 0.1},
       }) {
    Result<PipelineEstimate> exact =
        PipelineModel::Exact(c.kind, c.pp, c.vpp, c.micro, c.forward, c.backward, c.transfer);
    ASSERT_TRUE(exact.ok()) << exact.status().ToString();
    Result<PipelineEstimate> est =
        model.Estimate(c.kind, c.pp, c.vpp, c.micro, c.forward, c.backward, c.transfer);
    ASSERT_TRUE(est.ok()) << est.status().ToString();
    EXPECT_NEAR(est->step_time, exact->step_time, 1e-3 * exact->step_time)
        << ScheduleKindName(c.kind) << " pp=" << c.pp << " vpp=" << c.vpp << " m=" << c.micro;
    EXPECT_EQ(est->peak_in_flight, exact->peak_in_flight)
        << ScheduleKindName(c.kind) << " pp=" << c.pp << " vpp=" << c.vpp << " m=" << c.micro;
    EXPECT_EQ(est->simulations, 2) << "large m must be extrapolated from two small runs";
  }
}

TEST(PipelineModel, MemoisesNormalisedCosts) {
  PipelineModel model;
  Result<PipelineEstimate> a = model.Estimate(ScheduleKind::k1F1B, 4, 1, 8, 1.0, 2.0, 0.1);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->simulations, 1);
  // Twice as slow everywhere: same simulation, twice the time.
  Result<PipelineEstimate> b = model.Estimate(ScheduleKind::k1F1B, 4, 1, 8, 2.0, 4.0, 0.2);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->simulations, 0);
  EXPECT_DOUBLE_EQ(b->step_time, 2 * a->step_time);
  EXPECT_EQ(model.simulations(), 1);
  // 1F1B with uniform costs: (m + pp - 1)(f + b).
  EXPECT_DOUBLE_EQ(model.Estimate(ScheduleKind::k1F1B, 4, 1, 8, 1.0, 2.0, 0.0)->step_time,
                   (8 + 3) * 3.0);
}

TEST(PipelineModel, InvalidSchedulesAreErrors) {
  PipelineModel model;
  EXPECT_FALSE(model.Estimate(ScheduleKind::kInterleaved, 4, 2, 6, 1, 2, 0).ok());  // m % pp
  EXPECT_FALSE(model.Estimate(ScheduleKind::k1F1B, 4, 1, 8, 0, 2, 0).ok());
}

}  // namespace
}  // namespace loom
