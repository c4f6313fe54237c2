#include "worker/lr_schedule.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

TEST(LrSchedule, WarmupThenCosineThenFloor) {
  EXPECT_DOUBLE_EQ(ScheduledLr(1.0, 0.1, 10, 110, 0), 0.1);
  EXPECT_DOUBLE_EQ(ScheduledLr(1.0, 0.1, 10, 110, 9), 1.0);
  EXPECT_DOUBLE_EQ(ScheduledLr(1.0, 0.1, 10, 110, 10), 1.0);
  EXPECT_NEAR(ScheduledLr(1.0, 0.1, 10, 110, 60), 0.55, 1e-12);  // half way: mid point
  EXPECT_DOUBLE_EQ(ScheduledLr(1.0, 0.1, 10, 110, 110), 0.1);
  EXPECT_DOUBLE_EQ(ScheduledLr(1.0, 0.1, 10, 110, 500), 0.1);
  EXPECT_DOUBLE_EQ(ScheduledLr(1.0, 0.1, 0, 100, 0), 1.0);  // no warmup
}

}  // namespace
}  // namespace loom
