// Pipeline schedules and the simulator: bubble formulas with free communication and equal costs,
// peak in-flight micro-batches, deadlock freedom of every schedule for p <= 16, v <= 4, m <= 64,
// and broken programs caught.
#include <gtest/gtest.h>

#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/simulator.h"

namespace loom {
namespace {

SimResult Sim(ScheduleKind kind, int p, int v, int m, PipelineCosts c = {}) {
  auto s = MakeSchedule(kind, p, v, m);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  auto r = Simulate(*s, c);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

PipelineCosts Equal(double chunk_cost) {
  PipelineCosts c;
  c.forward = chunk_cost;
  c.backward = chunk_cost;  // "equal costs"
  return c;
}

TEST(PipelineSchedule, BubbleMatchesTheFormulas) {
  for (int p : {2, 4, 8}) {
    for (int m : {8, 16, 32}) {
      const double expect = double(p - 1) / m;
      for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
        SimResult r = Sim(k, p, 1, m, Equal(1.0));
        EXPECT_NEAR(r.max_bubble(), expect, 0.05 * expect)
            << ScheduleKindName(k) << " p=" << p << " m=" << m;
      }
      for (int v : {2, 4}) {
        // Each rank runs v chunks of 1/v of its layers.
        SimResult r = Sim(ScheduleKind::kInterleaved, p, v, m, Equal(1.0 / v));
        const double ev = double(p - 1) / (v * m);
        EXPECT_NEAR(r.max_bubble(), ev, 0.05 * ev)
            << "interleaved p=" << p << " v=" << v << " m=" << m;
      }
    }
  }
}

// Uneven stages (chunk_scale): with 1F1B the busiest stage paces the steady state, so a step of
// m micro-batches takes about m times its forward + backward; per-rank busy time follows each
// chunk's scale, and a scale list of the wrong size is refused.
TEST(PipelineSchedule, ChunkScaleWeighsEachStage) {
  PipelineCosts c = Equal(1.0);
  c.chunk_scale = {0.5, 1.5, 1.0, 1.0};
  const int m = 32;
  SimResult r = Sim(ScheduleKind::k1F1B, 4, 1, m, c);
  EXPECT_NEAR(r.busy[0], m * 2 * 0.5, 1e-9);
  EXPECT_NEAR(r.busy[1], m * 2 * 1.5, 1e-9);
  EXPECT_NEAR(r.busy[3], m * 2 * 1.0, 1e-9);
  EXPECT_GE(r.step_time, m * 2 * 1.5);
  EXPECT_LE(r.step_time, m * 2 * 1.5 + 2 * (0.5 + 1.5 + 1.0 + 1.0));
  // Interleaved: the scale belongs to the global chunk (local chunk k of rank r is k*pp + r).
  PipelineCosts v = Equal(1.0);
  v.chunk_scale = {2.0, 1.0, 1.0, 1.0};  // rank 0's first chunk only
  SimResult rv = Sim(ScheduleKind::kInterleaved, 2, 2, 4, v);
  EXPECT_NEAR(rv.busy[0], 4 * 2 * (2.0 + 1.0), 1e-9);
  EXPECT_NEAR(rv.busy[1], 4 * 2 * (1.0 + 1.0), 1e-9);
  auto s = MakeSchedule(ScheduleKind::k1F1B, 4, 1, 8);
  ASSERT_TRUE(s.ok());
  c.chunk_scale = {1.0, 1.0};
  EXPECT_FALSE(Simulate(*s, c).ok());
}

TEST(PipelineSchedule, PeakInFlight) {
  for (int p : {2, 4, 8}) {
    for (int m : {4, 8, 16}) {
      SimResult g = Sim(ScheduleKind::kGPipe, p, 1, m);
      SimResult f = Sim(ScheduleKind::k1F1B, p, 1, m);
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(g.peak_in_flight[r], m);
        EXPECT_LE(f.peak_in_flight[r], p);
      }
      EXPECT_EQ(f.peak_in_flight[0], std::min(p, m));  // the first stage holds the most
    }
  }
}

TEST(PipelineSchedule, EveryScheduleIsDeadlockFree) {
  int checked = 0;
  for (int p = 1; p <= 16; ++p) {
    for (int m = 1; m <= 64; ++m) {
      for (ScheduleKind k :
           {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kZeroBubbleH1}) {
        auto s = MakeSchedule(k, p, 1, m);
        ASSERT_TRUE(s.ok());
        auto r = Simulate(*s, PipelineCosts{});
        ASSERT_TRUE(r.ok()) << ScheduleKindName(k) << " p=" << p << " m=" << m << ": "
                            << r.status().ToString();
        ++checked;
      }
      for (int v = 2; v <= 4 && p >= 2; ++v) {
        auto s = MakeSchedule(ScheduleKind::kInterleaved, p, v, m);
        if (m % p != 0) {
          ASSERT_FALSE(s.ok());
          EXPECT_NE(s.status().message().find("multiple of pp"), std::string::npos);
          continue;
        }
        ASSERT_TRUE(s.ok());
        auto r = Simulate(*s, PipelineCosts{});
        ASSERT_TRUE(r.ok()) << "interleaved p=" << p << " v=" << v << " m=" << m << ": "
                            << r.status().ToString();
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 3000);
}

TEST(PipelineSchedule, ZeroBubbleH1HasLessBubbleThan1F1B) {
  PipelineCosts c;
  c.forward = 1;
  c.backward = 2;
  c.backward_input = 1;
  c.backward_weight = 1;
  SimResult one = Sim(ScheduleKind::k1F1B, 4, 1, 8, c);
  SimResult zb = Sim(ScheduleKind::kZeroBubbleH1, 4, 1, 8, c);
  EXPECT_LT(zb.step_time, one.step_time);
  for (int r = 0; r < 4; ++r) EXPECT_LE(zb.peak_in_flight[r], 4);
}

TEST(PipelineSchedule, TransfersCostTime) {
  PipelineCosts c;
  c.p2p_latency = 0.5;
  SimResult slow = Sim(ScheduleKind::k1F1B, 4, 1, 8, c);
  SimResult fast = Sim(ScheduleKind::k1F1B, 4, 1, 8);
  EXPECT_GT(slow.step_time,
            fast.step_time + 2.9);  // at least the 6 hops of the first/last micro-batch
}

TEST(PipelineSchedule, BrokenProgramsAreCaught) {
  auto s = MakeSchedule(ScheduleKind::k1F1B, 3, 1, 4);
  ASSERT_TRUE(s.ok());
  // Drop rank 1's first send: rank 2 waits forever for micro-batch 0.
  Schedule missing = *s;
  auto& r1 = missing.ranks[1];
  r1.erase(std::find_if(r1.begin(), r1.end(),
                        [](const Instr& i) { return i.kind == InstrKind::kSendAct; }));
  auto res = Simulate(missing, {});
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.status().message().find("deadlocks"), std::string::npos);
  EXPECT_NE(res.status().message().find("rank 2 waits at recv_act(mb 0"), std::string::npos)
      << res.status().message();
  // Swap two receives on the last rank into an order its peer cannot satisfy: a cycle.
  Schedule cycle = *s;
  auto& r0 = cycle.ranks[0];
  auto f = std::find_if(r0.begin(), r0.end(),
                        [](const Instr& i) { return i.kind == InstrKind::kRecvGrad; });
  const Instr recv = *f;
  r0.erase(f);
  r0.insert(r0.begin(), recv);  // rank 0 waits for a gradient before sending any activation
  EXPECT_FALSE(Simulate(cycle, {}).ok());
  // A send nobody receives.
  Schedule extra = *s;
  extra.ranks[0].insert(extra.ranks[0].begin(), Instr{InstrKind::kSendAct, 9, 0, 1});
  auto e = Simulate(extra, {});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("never received"), std::string::npos);
}

TEST(PipelineSchedule, RequirementsAreNamed) {
  EXPECT_NE(MakeSchedule(ScheduleKind::kInterleaved, 4, 2, 6)
                .status()
                .message()
                .find("micro-batches (6) to be a multiple of pp (4)"),
            std::string::npos);
  EXPECT_FALSE(MakeSchedule(ScheduleKind::k1F1B, 4, 2, 8).ok());
  EXPECT_FALSE(MakeSchedule(ScheduleKind::kInterleaved, 4, 1, 8).ok());
  EXPECT_FALSE(ParseScheduleKind("zigzag").ok());
  EXPECT_EQ(*ParseScheduleKind("interleaved"), ScheduleKind::kInterleaved);
}

TEST(PipelineSchedule, TimelineRenders) {
  auto s = MakeSchedule(ScheduleKind::kInterleaved, 4, 2, 8);
  ASSERT_TRUE(s.ok());
  auto r = Simulate(*s, Equal(0.5));
  ASSERT_TRUE(r.ok());
  std::string chart = RenderTimeline(*s, *r, 80);
  EXPECT_NE(chart.find("rank  3 |"), std::string::npos);
  EXPECT_NE(chart.find("F0.0"), std::string::npos) << chart;
  EXPECT_NE(chart.find("peak in flight"), std::string::npos);
}

}  // namespace
}  // namespace loom
