// Job bookkeeping: registration checks, plans per rank, steps completing when every rank has
// reported, silent ranks, how ranks finished.
#include "coordinator/service/job_state.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

JobSpec Spec() {
  JobSpec s;
  s.token = "t";
  s.layout.tp = 2;
  s.layout.dp = 2;
  s.layout.zero = 1;
  s.job_yaml = "steps: 10\n";
  s.job_path = "/jobs/j.yaml";
  s.steps = 10;
  s.tokens_per_step = 1000;
  s.flops_per_step = 4e9;
  s.peak_flops = 1e9;
  return s;
}

proto::RegisterRequest Req(int rank, int world = 4, int pid = 100) {
  proto::RegisterRequest r;
  r.set_rank(rank);
  r.set_world_size(world);
  r.set_host("h");
  r.set_pid(pid + rank);
  return r;
}

proto::StepReport Report(int rank, int64_t step, double loss, double step_s) {
  proto::StepReport r;
  r.set_rank(rank);
  r.set_step(step);
  r.set_loss(loss);
  r.set_step_s(step_s);
  return r;
}

TEST(JobState, PlansCarryCoordinatesAndTheJob) {
  JobState job(Spec());
  for (int r = 0; r < 4; ++r) {
    auto plan = job.Register(Req(r), 0);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->rank(), r);
    EXPECT_EQ(plan->tp_rank(), r % 2);
    EXPECT_EQ(plan->dp_rank(), r / 2);
    EXPECT_EQ(plan->layout().tp(), 2);
    EXPECT_EQ(plan->layout().zero(), 1);
    EXPECT_EQ(plan->job_yaml(), "steps: 10\n");
    EXPECT_EQ(plan->device(), r);
    EXPECT_EQ(plan->core_shares(), 0);  // not split
  }
  EXPECT_EQ(job.GetProgress().registered, 4);
}

TEST(JobState, PlansCarryTheNodesShareOfItsHostsCores) {
  JobSpec spec = Spec();
  spec.core_share = {0, 0, 1, 1};
  spec.core_shares = {2, 2, 2, 2};
  JobState job(spec);
  for (int r = 0; r < 4; ++r) {
    auto plan = job.Register(Req(r), 0);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->core_share(), r / 2);
    EXPECT_EQ(plan->core_shares(), 2);
  }
}

TEST(JobState, RegistrationErrorsNameTheField) {
  JobState job(Spec());
  auto bad = job.Register(Req(4), 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("field 'rank': expected 0..3, got 4"), std::string::npos);
  bad = job.Register(Req(0, 8), 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("field 'world_size'"), std::string::npos);
  ASSERT_TRUE(job.Register(Req(1), 0).ok());
  ASSERT_TRUE(job.Register(Req(1), 1).ok());  // the same process again: fine
  bad = job.Register(Req(1, 4, 999), 2);      // another process claiming rank 1
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("already registered by pid 101"), std::string::npos);
  proto::Heartbeat hb;
  hb.set_rank(2);
  EXPECT_FALSE(job.Heartbeat(hb, 3).ok());  // rank 2 never registered
}

TEST(JobState, AStepCompletesWhenEveryRankReported) {
  JobState job(Spec());
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(job.Register(Req(r), 0).ok());
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(job.Report(Report(r, 1, 5.0 + r, 0.5), 1).ok());
  EXPECT_EQ(job.GetProgress().step, 0);
  ASSERT_TRUE(job.Report(Report(3, 1, 5.3, 2.0), 1).ok());
  Progress p = job.GetProgress();
  EXPECT_EQ(p.step, 1);
  EXPECT_DOUBLE_EQ(p.loss, 5.0);    // rank 0's
  EXPECT_DOUBLE_EQ(p.step_s, 2.0);  // the slowest rank's
  EXPECT_DOUBLE_EQ(p.tokens_per_s, 500.0);
  EXPECT_DOUBLE_EQ(p.mfu, 4e9 / 2.0 / (1e9 * 4));
  EXPECT_DOUBLE_EQ(p.eta_s, 18.0);
  EXPECT_EQ(job.LatestReports().size(), 4u);
  EXPECT_FALSE(job.Report(Report(2, 1, 5.0, 0.5), 2).ok());  // already complete
}

TEST(JobState, SilentRanksAndFinishing) {
  JobState job(Spec());
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(job.Register(Req(r), 0).ok());
  proto::Heartbeat hb;
  for (int r : {0, 1, 3}) {
    hb.set_rank(r);
    ASSERT_TRUE(job.Heartbeat(hb, 50).ok());
  }
  EXPECT_EQ(job.Silent(55, 30), std::vector<int>({2}));
  proto::Done done;
  done.set_rank(2);
  done.set_ok(false);
  done.set_error("boom");
  ASSERT_TRUE(job.Done(done, 56).ok());
  EXPECT_TRUE(job.Silent(57, 30).empty());  // finished ranks are not silent
  Progress p = job.GetProgress();
  EXPECT_EQ(p.done, 1);
  EXPECT_EQ(p.failed, 1);
  EXPECT_EQ(job.Ranks()[2].error, "boom");
  EXPECT_FALSE(p.final.has_value());
  done.set_rank(0);
  done.set_ok(true);
  EXPECT_FALSE(job.Done(done, 58).ok());  // success before the last step
  done.set_step(10);
  ASSERT_TRUE(job.Done(done, 58).ok());
  EXPECT_TRUE(job.GetProgress().final.has_value());
  EXPECT_FALSE(job.Done(done, 59).ok());  // twice
}

TEST(JobState, AStopOnASignalIsRecordedWithItsStep) {
  JobState job(Spec());
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(job.Register(Req(r), 0).ok());
  proto::Done done;
  done.set_rank(1);
  done.set_ok(false);
  done.set_step(7);
  done.set_stopped_by_signal(10);
  done.set_error("stopped after step 7 on SIGUSR1");
  ASSERT_TRUE(job.Done(done, 1).ok());
  EXPECT_EQ(job.Ranks()[1].stopped_by, 10);
  EXPECT_EQ(job.Ranks()[1].step, 7);
  EXPECT_EQ(job.Ranks()[0].stopped_by, 0);
  // A stop claimed with success, or a signal number out of range, is refused by name.
  done.set_rank(2);
  done.set_ok(true);
  done.set_step(10);
  auto st = job.Done(done, 2);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("field 'stopped_by_signal'"), std::string::npos) << st.message();
  done.set_ok(false);
  done.set_stopped_by_signal(66);  // 1-64: signals; 65: the time limit
  EXPECT_FALSE(job.Done(done, 2).ok());
  done.set_stopped_by_signal(-1);
  EXPECT_FALSE(job.Done(done, 2).ok());
  EXPECT_FALSE(job.Ranks()[2].done);  // nothing recorded from the refused ones
}

TEST(JobState, RanksCannotStandInForEachOther) {
  JobState job(Spec());
  ASSERT_TRUE(job.Register(Req(0), 0).ok());
  // The same rank reporting a step again does not make up for the ranks that did not.
  ASSERT_TRUE(job.Report(Report(0, 1, 5.0, 0.5), 1).ok());
  EXPECT_FALSE(job.Report(Report(0, 1, 5.0, 0.5), 1).ok());
  EXPECT_EQ(job.GetProgress().step, 0);
  // Steps past the job, negative times, and news from ranks that never registered are refused.
  auto past = job.Report(Report(0, 11, 5.0, 0.5), 2);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.message().find("past the job's 10 steps"), std::string::npos);
  EXPECT_FALSE(job.Report(Report(0, 2, 5.0, -1), 2).ok());
  proto::Done done;
  done.set_rank(1);
  done.set_ok(true);
  done.set_step(10);
  auto st = job.Done(done, 3);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("has not registered"), std::string::npos);
  EXPECT_EQ(job.GetProgress().done, 0);
}

}  // namespace
}  // namespace loom
