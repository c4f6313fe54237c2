// The detector on synthetic traces (synthetic.h): every class named with its culprit in at least
// 99% of 200 seeded injections each, within the steps the issue allows, and no alarm over
// 10,000 healthy steps.
#include "fault/detector/detector.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "tests/fault/detector/synthetic.h"

namespace loom::detect {
namespace {

using testing::Fault;
using testing::Simulator;
using testing::Topology;

Detector Make(const Simulator& sim) {
  Detector d(sim.Config());
  for (const GroupInfo& g : sim.Groups()) d.AddGroup(g);
  return d;
}

TEST(DetectorTest, NoAlarmOverTenThousandHealthySteps) {
  for (Topology t : {Topology::kPipeline, Topology::kData}) {
    Simulator sim(t, 42);
    Detector d = Make(sim);
    int alarms = 0;
    for (int i = 0; i < 10000; ++i) {
      for (const Verdict& v : d.OnStep(sim.Step(Fault{}))) {
        ++alarms;
        ADD_FAILURE() << "false alarm at step " << sim.step() << ": " << v.line;
      }
    }
    EXPECT_EQ(alarms, 0);
  }
}

// Runs `healthy` steps, then the fault for up to `within` steps; the first verdict.
std::optional<Verdict> Inject(Simulator* sim, Detector* d, const Fault& f, int healthy, int within,
                              int* steps) {
  for (int i = 0; i < healthy; ++i) {
    std::vector<Verdict> v = d->OnStep(sim->Step(Fault{}));
    if (!v.empty()) return v.front();  // a false alarm: counted as wrong
  }
  for (*steps = 1; *steps <= within; ++*steps) {
    std::vector<Verdict> v = d->OnStep(sim->Step(f));
    if (!v.empty()) return v.front();
  }
  return std::nullopt;
}

// (The issue's five steps are the integration test's; here the figure is printed.)
TEST(DetectorTest, SlowRankNamed) {
  for (Topology t : {Topology::kPipeline, Topology::kData}) {
    int right = 0, worst = 0;
    for (uint64_t seed = 0; seed < 200; ++seed) {
      Simulator sim(t, 1000 + seed);
      Detector d = Make(sim);
      Fault f;
      f.slow_rank = static_cast<int>(seed % 8);
      int steps = 0;
      std::optional<Verdict> v = Inject(&sim, &d, f, 5 + seed % 7, 10, &steps);
      if (v && v->kind == AnomalyKind::kSlowRank && v->rank == f.slow_rank) {
        ++right;
        worst = std::max(worst, steps);
      } else {
        ADD_FAILURE() << "seed " << seed << ": " << (v ? v->line : "nothing named");
      }
      if (seed == 0 && v) std::printf("%s\n", v->line.c_str());
    }
    EXPECT_GE(right, 198);
    std::printf("slow rank: %d/200 named, within %d steps\n", right, worst);
  }
}

// Eight data-parallel ranks, four pinned to each of two CPUs (core/affinity.h), one CPU 1.4x
// slower for 2,000 steps (a hypervisor's neighbour): its ranks are compared with each other, so
// nothing is named; the same steps without the CPUs in the evidence name a rank.
TEST(DetectorTest, ASlowCoreIsNotASlowRank) {
  const std::vector<std::string> cpus = {"0", "0", "0", "0", "1", "1", "1", "1"};
  Fault slow_core;
  slow_core.slow_cpus = "0";
  for (const bool pinned : {true, false}) {
    Simulator sim(Topology::kData, 7);
    sim.set_cpus(cpus);
    Detector d = Make(sim);
    int alarms = 0;
    for (int i = 0; i < 2000; ++i) {
      std::vector<RankStep> step = sim.Step(slow_core);
      if (!pinned) {
        for (RankStep& s : step) s.cpus.clear();
      }
      alarms += static_cast<int>(d.OnStep(step).size());
    }
    if (pinned) {
      EXPECT_EQ(alarms, 0);
    } else {
      EXPECT_GT(alarms, 0) << "without the CPUs the slow core's ranks score 1.4";
    }
  }
}

// With the slow core, a 1.5x slow rank on it or on the other one is still named.
TEST(DetectorTest, SlowRankNamedAmongRanksSharingACore) {
  int right = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Simulator sim(Topology::kData, 3000 + seed);
    sim.set_cpus({"0", "0", "0", "0", "1", "1", "1", "1"});
    Detector d = Make(sim);
    Fault f;
    f.slow_cpus = "0";
    f.slow_rank = static_cast<int>(seed % 8);
    std::optional<Verdict> v;
    for (int i = 0; i < 8 + static_cast<int>(seed % 5) && !v; ++i) {  // healthy but the core
      Fault core_only;
      core_only.slow_cpus = "0";
      std::vector<Verdict> vs = d.OnStep(sim.Step(core_only));
      if (!vs.empty()) v = vs.front();
    }
    int steps = 0;
    for (steps = 1; steps <= 10 && !v; ++steps) {
      std::vector<Verdict> vs = d.OnStep(sim.Step(f));
      if (!vs.empty()) v = vs.front();
    }
    if (v && v->kind == AnomalyKind::kSlowRank && v->rank == f.slow_rank) {
      ++right;
    } else {
      ADD_FAILURE() << "seed " << seed << ": " << (v ? v->line : "nothing named");
    }
  }
  EXPECT_GE(right, 198);
}

// Links are judged once their transfers' warm-up is over; a fault from then on.
const int kLinkWarm = DetectorConfig{}.warmup + DetectorConfig{}.link_warmup;

TEST(DetectorTest, SlowLinkNamedAsTheLinkWithinTenSteps) {
  int right = 0, worst = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Simulator sim(Topology::kPipeline, 5000 + seed);
    Detector d = Make(sim);
    std::mt19937 rng(static_cast<unsigned>(seed));
    Fault f;
    f.link_src = static_cast<int>(rng() % 8);
    // Forward (to the next stage) or backward (to the previous), within the pipeline.
    const bool forward = f.link_src < 2 || (f.link_src < 6 && rng() % 2 == 0);
    f.link_dst = forward ? f.link_src + 2 : f.link_src - 2;
    int steps = 0;
    std::optional<Verdict> v = Inject(&sim, &d, f, kLinkWarm + seed % 7, 10, &steps);
    if (v && v->kind == AnomalyKind::kSlowLink && v->src == f.link_src && v->dst == f.link_dst) {
      ++right;
      worst = std::max(worst, steps);
    } else {
      ADD_FAILURE() << "seed " << seed << " link " << f.link_src << "->" << f.link_dst << ": "
                    << (v ? v->line : "nothing named");
    }
    if (seed == 0 && v) std::printf("%s\n", v->line.c_str());
  }
  EXPECT_GE(right, 198);
  std::printf("slow link: %d/200 named, within %d steps\n", right, worst);
}

TEST(DetectorTest, SlowNicNamedAsTheNode) {
  int right = 0, worst = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Simulator sim(Topology::kPipeline, 9000 + seed);
    Detector d = Make(sim);
    Fault f;
    f.slow_node = static_cast<int>(seed % 4);
    int steps = 0;
    std::optional<Verdict> v = Inject(&sim, &d, f, kLinkWarm + seed % 7, 10, &steps);
    if (v && v->kind == AnomalyKind::kSlowNode && v->node == f.slow_node) {
      ++right;
      worst = std::max(worst, steps);
    } else {
      ADD_FAILURE() << "seed " << seed << " node " << f.slow_node << ": "
                    << (v ? v->line : "nothing named");
    }
    if (seed == 0 && v) std::printf("%s\n", v->line.c_str());
  }
  EXPECT_GE(right, 198);
  std::printf("slow node: %d/200 named, within %d steps\n", right, worst);
}

// Beats of the pipeline job (tp = 2 inside nodes, pp = 4 across) at `now`, rank `culprit` having
// stopped (or hung in compute) at `t0`: its tp partner waits for it in tp all-reduce #100; the
// other stages wait in a receive from their neighbour towards the culprit's stage (activations
// from the stage before, gradients from the stage after).
enum class HangMode { kStoppedBefore, kStoppedInside, kCompute };

std::vector<Beat> HangBeats(HangMode mode, int culprit, double t0, double now, std::mt19937* rng) {
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<Beat> beats(8);
  const int cs = culprit / 2;
  for (int r = 0; r < 8; ++r) {
    Beat& b = beats[r];
    b.rank = r;
    b.step = 20;
    b.received_s = now - 0.25 * u(*rng);
    const std::string tp = "tp@" + std::to_string(r / 2 * 2);
    b.issued[tp] = 101;
    b.blocked = true;
    b.blocked_since_s = t0 + 0.1 * u(*rng);
    if (r / 2 == cs) {
      b.op = "all_reduce";
      b.group = tp;
      b.seq = 100;
    } else {
      b.op = "recv";
      b.group = "pp@" + std::to_string(r % 2);
      b.seq = 50 + static_cast<uint64_t>(u(*rng) * 4);
      b.peer = r / 2 > cs ? r - 2 : r + 2;
    }
  }
  Beat& c = beats[culprit];
  const std::string tp = "tp@" + std::to_string(cs * 2);
  if (mode != HangMode::kStoppedInside) {
    c.issued[tp] = 100;
    c.blocked = false;
  }
  if (mode != HangMode::kCompute) c.received_s = t0 - 0.25 * u(*rng);
  return beats;
}

TEST(DetectorTest, HangNamedWithItsCulprit) {
  Simulator sim(Topology::kPipeline, 1);
  for (HangMode mode : {HangMode::kStoppedBefore, HangMode::kStoppedInside, HangMode::kCompute}) {
    int right = 0;
    for (uint64_t seed = 0; seed < 200; ++seed) {
      std::mt19937 rng(static_cast<unsigned>(seed));
      Detector d = Make(sim);
      const int culprit = static_cast<int>(seed % 8);
      const double t0 = 500, step_s = 0.05 * (0.9 + 0.2 * (rng() % 100) / 100.0);
      // Early on, nothing yet: the others have waited less than the hang limit.
      const double early = t0 + 1.0;
      EXPECT_FALSE(d.OnBeats(HangBeats(mode, culprit, t0, early, &rng), early, step_s));
      const double at = mode == HangMode::kCompute ? t0 + 65 : t0 + 3.0;
      std::optional<Verdict> v = d.OnBeats(HangBeats(mode, culprit, t0, at, &rng), at, step_s);
      const bool ok = v && v->kind == AnomalyKind::kHang && v->rank == culprit &&
                      v->in_compute == (mode != HangMode::kStoppedInside) &&
                      v->stopped == (mode != HangMode::kCompute);
      if (ok) {
        ++right;
      } else {
        ADD_FAILURE() << "mode " << static_cast<int>(mode) << " seed " << seed << ": "
                      << (v ? v->line : "nothing named");
      }
      if (seed == 0 && v) std::printf("%s\n", v->line.c_str());
      // Once per onset.
      EXPECT_FALSE(d.OnBeats(HangBeats(mode, culprit, t0, at + 0.5, &rng), at + 0.5, step_s));
    }
    EXPECT_GE(right, 198);
    std::printf("hang mode %d: %d/200 named\n", static_cast<int>(mode), right);
  }
}

TEST(DetectorTest, ASilentRankWhoseLastBeatSaidItWasSavingIsStillNamed) {
  Simulator sim(Topology::kPipeline, 1);
  Detector d = Make(sim);
  std::mt19937 rng(3);
  std::vector<Beat> beats = HangBeats(HangMode::kStoppedBefore, 5, 500, 503, &rng);
  beats[5].io = true;  // frozen while its snapshot was being saved
  std::optional<Verdict> v = d.OnBeats(beats, 503, 0.05);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rank, 5);
  EXPECT_TRUE(v->stopped);
}

TEST(DetectorTest, NoHangWhileWaitsAreShortOrAnyRankIsInCheckpointIo) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  Simulator sim(Topology::kPipeline, 1);
  Detector d = Make(sim);
  for (int i = 0; i < 10000; ++i) {
    const double now = 1000 + i * 0.25;
    std::vector<Beat> beats =
        HangBeats(HangMode::kStoppedBefore, i % 8, now - 1.8 * u(rng), now, &rng);
    beats[i % 8].received_s = now - 0.25 * u(rng);  // alive, only slower to the call
    if (i % 2) {                                    // long waits, but a rank is saving a checkpoint
      for (Beat& b : beats) b.blocked_since_s -= 70;
      beats[(i + 3) % 8].io = true;
    }
    std::optional<Verdict> v = d.OnBeats(beats, now, 0.05);
    EXPECT_FALSE(v) << v->line;
  }
}

// A coordinator short of CPU time reads the ranks' messages seconds late, one by one: every rank
// sent its latest message around t0, and the coordinator has read the waiting ranks' just now
// but the culprit's 2.3 s ago. By when messages were read alone, that is a rank silent for 2.3 s
// that the others wait for (the false verdict seen live); by when they were sent, nobody is
// silent. A rank that really stopped at t0, while the others kept speaking, is still named, and
// while the coordinator has read nothing for stale_s nobody is.
TEST(DetectorTest, ACoordinatorReadingLateBlamesNoRank) {
  Simulator sim(Topology::kPipeline, 1);
  std::uniform_real_distribution<double> u(0, 1);
  int named_before = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(static_cast<unsigned>(seed));
    const int culprit = static_cast<int>(seed % 8);
    const double t0 = 500, now = t0 + 3.0, step_s = 0.05;
    std::vector<Beat> beats = HangBeats(HangMode::kStoppedBefore, culprit, t0, now, &rng);
    for (Beat& b : beats) b.sent_s = t0 - 0.2 * u(rng);
    beats[culprit].received_s = now - 2.3;
    std::vector<Beat> unsent = beats;  // what the old rule saw: receipt times only
    for (Beat& b : unsent) b.sent_s = -1;
    Detector before = Make(sim);
    if (before.OnBeats(unsent, now, step_s)) ++named_before;  // shows the test can fail
    Detector d = Make(sim);
    std::optional<Verdict> v = d.OnBeats(beats, now, step_s);
    EXPECT_FALSE(v) << "seed " << seed << ": " << v->line;
    // Nothing read for stale_s: nobody named, whatever the beats say.
    std::vector<Beat> unread = beats;
    for (Beat& b : unread) b.received_s = now - 2.5 - 0.2 * u(rng);
    EXPECT_FALSE(d.OnBeats(unread, now, step_s));
    // A real stop at t0: the others kept sending.
    for (Beat& b : beats) b.sent_s = now - 0.1 - 0.1 * u(rng);
    beats[culprit].sent_s = t0 - 0.1 * u(rng);
    v = d.OnBeats(beats, now, step_s);
    ASSERT_TRUE(v) << "seed " << seed;
    EXPECT_EQ(v->rank, culprit);
    EXPECT_TRUE(v->stopped);
  }
  EXPECT_EQ(named_before, 200);
}

}  // namespace
}  // namespace loom::detect
