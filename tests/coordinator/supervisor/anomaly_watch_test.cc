// The detector fed from the coordinator's job state: synthetic evidence (tests/fault/detector/
// synthetic.h) sent as step reports and beats, a slow rank and a stopped rank named; the
// post-mortem written, read back (bad files named) and replayed to the same verdict.
#include "coordinator/supervisor/anomaly_watch.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "coordinator/supervisor/post_mortem.h"
#include "tests/fault/detector/synthetic.h"

namespace loom {
namespace {

using detect::testing::Fault;
using detect::testing::Simulator;
using detect::testing::Topology;

// The synthetic job: tp = 2 inside each of 4 nodes, pp = 4 across them.
JobSpec Spec() {
  JobSpec s;
  s.token = "t";
  s.layout.tp = 2;
  s.layout.pp = 4;
  s.job_yaml = "steps: 100\n";
  s.steps = 100;
  s.node = {0, 0, 1, 1, 2, 2, 3, 3};
  s.detect = true;
  return s;
}

// The simulator's step as the ranks report it.
proto::StepReport ReportOf(const detect::RankStep& s, const std::vector<detect::GroupInfo>& g) {
  proto::StepReport r;
  r.set_rank(s.rank);
  r.set_step(s.step);
  r.set_step_s(static_cast<double>(s.end_ns - s.start_ns) * 1e-9);
  proto::StepEvidence& ev = *r.mutable_evidence();
  ev.set_start_ns(s.start_ns);
  ev.set_end_ns(s.end_ns);
  ev.set_compute_ns(s.compute_ns);
  std::map<std::string, int> index;
  for (const detect::CallEvidence& c : s.calls) {
    auto [it, added] = index.emplace(c.group, ev.groups_size());
    if (added) {
      proto::TraceGroupRef& ref = *ev.add_groups();
      for (const detect::GroupInfo& gi : g) {
        if (detect::GroupKey(gi.name, gi.members) == c.group) {
          ref.set_name(gi.name);
          ref.set_root(gi.members.front());
          for (int m : gi.members) ref.add_members(m);
        }
      }
    }
    proto::TraceCall& t = *ev.add_calls();
    t.set_op(c.op);
    t.set_group(it->second);
    t.set_seq(c.seq);
    t.set_enter_ns(c.enter_ns);
    t.set_exit_ns(c.exit_ns);
    t.set_bytes(c.bytes);
    t.set_peer(c.peer);
    t.set_tag(c.tag);
  }
  return r;
}

class AnomalyWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int r = 0; r < 8; ++r) {
      proto::RegisterRequest req;
      req.set_rank(r);
      req.set_world_size(8);
      req.set_host("h");
      req.set_pid(100 + r);
      ASSERT_TRUE(job_.Register(req, 0).ok());
    }
    dir_ = ::testing::TempDir() + "/anomaly_watch_test";
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Steps of the simulator reported by every rank.
  void Run(int steps, const Fault& f) {
    for (int i = 0; i < steps; ++i) {
      for (const detect::RankStep& s : sim_.Step(f)) {
        ASSERT_TRUE(job_.Report(ReportOf(s, sim_.Groups()), now_).ok());
      }
      now_ += 0.05;
    }
  }

  AnomalyWatch Watch() {
    return AnomalyWatch(
        DetectorConfigFor(job_.spec().layout, job_.spec().node, {"n0", "n1", "n2", "n3"}));
  }

  Simulator sim_{Topology::kPipeline, 3};
  JobState job_{Spec()};
  double now_ = 10;
  std::string dir_;
};

TEST_F(AnomalyWatchTest, NamesASlowRankFromStepReports) {
  AnomalyWatch w = Watch();
  Run(6, Fault{});
  EXPECT_TRUE(w.Observe(job_, now_).empty());
  Fault f;
  f.slow_rank = 5;
  Run(5, f);
  const std::vector<detect::Verdict> v = w.Observe(job_, now_);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, detect::AnomalyKind::kSlowRank);
  EXPECT_EQ(v[0].rank, 5);
  EXPECT_EQ(v[0].node, 2);
  EXPECT_NE(v[0].line.find("rank 5 (n2) is slow"), std::string::npos) << v[0].line;
}

// Every rank beats; rank 3 stops, its partner waits for it in a tp all-reduce.
void Beat(JobState* job, int rank, double now, bool blocked, uint64_t issued) {
  proto::Heartbeat hb;
  hb.set_rank(rank);
  hb.set_step(6);
  proto::IssuedCount& c = *hb.add_issued();
  c.set_group("tp");
  c.set_root(rank / 2 * 2);
  c.set_next_seq(issued);
  if (blocked) {
    proto::LiveCall& b = *hb.mutable_blocked();
    b.set_op("all_reduce");
    b.set_group("tp");
    b.set_root(rank / 2 * 2);
    b.set_seq(40);
    b.set_since_ns(static_cast<int64_t>((now - 0.1) * 1e9));
    b.set_peer(-1);
  }
  ASSERT_TRUE(job->Heartbeat(hb, now).ok());
}

TEST_F(AnomalyWatchTest, NamesAStoppedRankFromBeatsAndThePostMortemAgrees) {
  AnomalyWatch w = Watch();
  Run(6, Fault{});
  EXPECT_TRUE(w.Observe(job_, now_).empty());
  const double stop = now_;
  Beat(&job_, 3, stop, false, 40);  // its last beat: computing, before tp #40
  for (double t = stop; t < stop + 3.5; t += 0.25) {
    for (int r : {0, 1, 2, 4, 5, 6, 7}) Beat(&job_, r, t, r == 2, 41);
  }
  // rank 2 has been blocked since stop + 3.15 (its last beat's since): not yet a hang...
  EXPECT_TRUE(w.Observe(job_, stop + 3.5).empty());
  // ... until it has waited past the limit, rank 3 silent all along.
  for (int r : {0, 1, 4, 5, 6, 7}) Beat(&job_, r, stop + 6, false, 41);
  proto::Heartbeat hb;
  hb.set_rank(2);
  hb.set_step(6);
  proto::IssuedCount& c = *hb.add_issued();
  c.set_group("tp");
  c.set_root(2);
  c.set_next_seq(41);
  proto::LiveCall& b = *hb.mutable_blocked();
  b.set_op("all_reduce");
  b.set_group("tp");
  b.set_root(2);
  b.set_seq(40);
  b.set_since_ns(static_cast<int64_t>((stop + 0.2) * 1e9));
  b.set_peer(-1);
  ASSERT_TRUE(job_.Heartbeat(hb, stop + 6).ok());
  const std::vector<detect::Verdict> v = w.Observe(job_, stop + 6);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].kind, detect::AnomalyKind::kHang);
  EXPECT_EQ(v[0].rank, 3);
  EXPECT_TRUE(v[0].stopped);
  EXPECT_NE(v[0].line.find("rank 3 (n1) hung: it stopped responding"), std::string::npos)
      << v[0].line;

  const PostMortem pm =
      CollectPostMortem(job_, 0, &w.detector().config(), "restarted", v[0].line, stop + 6);
  ASSERT_TRUE(WritePostMortem(dir_, pm).ok());
  Result<PostMortem> back = ReadPostMortem(dir_);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->ranks.size(), 8u);
  EXPECT_EQ(back->ranks[5].steps_size(), 6);
  const std::vector<detect::Verdict> replayed = Replay(*back);
  ASSERT_EQ(replayed.size(), 1u);
  EXPECT_EQ(replayed[0].rank, 3);
  const std::string text = DescribePostMortem(*back);
  EXPECT_NE(text.find("detector (replayed): hang: rank 3 (n1) hung"), std::string::npos) << text;
  EXPECT_NE(text.find("blocked"), std::string::npos) << text;

  // A damaged file is named, with what was expected.
  std::ofstream(dir_ + "/rank_00004.json") << "{\"rank\": \"four\"";
  Result<PostMortem> bad = ReadPostMortem(dir_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rank_00004.json"), std::string::npos);
  EXPECT_FALSE(ReadPostMortem(dir_ + "/none").ok());
}

}  // namespace
}  // namespace loom
