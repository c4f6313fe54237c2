// The supervisor's rules without processes: a made-up job snapshot and clock in, the actions
// out. Every rule (signal, exit, ending, stall, silence, registration) and its edges.
#include "coordinator/supervisor/supervisor.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <algorithm>

#include "core/stop_signal.h"

namespace loom {
namespace {

constexpr double kT0 = 100;  // the supervisor starts here (seconds)

SupervisorConfig Config(const std::string& launcher = "mpirun") {
  SupervisorConfig c;
  c.world = 2;
  c.launcher = launcher;
  c.stop_signal = SIGUSR1;
  c.silence_s = 60;
  c.checkpoint_io_s = 1000;
  return c;
}

// A job of `world` ranks, all registered and last heard from at `now`, at `step` (complete).
JobSnapshot Job(int world, int64_t step, double now, double step_s = 0.1) {
  JobSnapshot j;
  j.progress.world = world;
  j.progress.registered = world;
  j.progress.step = step;
  j.progress.step_s = step_s;
  for (int r = 0; r < world; ++r) {
    RankStatus s;
    s.registered = true;
    s.host = "h";
    s.pid = 10 + r;
    s.last_contact = now;
    s.step = step;
    j.ranks.push_back(s);
  }
  return j;
}

// Rank `r` ended: ok, or failed with `error`, or stopped after `step` on `signal`.
void End(JobSnapshot* j, int r, bool ok, const std::string& error = "", int signal = 0) {
  RankStatus& s = j->ranks[static_cast<size_t>(r)];
  s.done = true;
  s.ok = ok;
  s.error = error;
  s.stopped_by = signal;
  ++j->progress.done;
  if (!ok) ++j->progress.failed;
}

Observation At(double now, JobSnapshot job, int signal = 0,
               std::optional<int> exit = std::nullopt) {
  Observation o;
  o.now = now;
  o.signal = signal;
  o.launcher_exit = exit;
  o.job = std::move(job);
  return o;
}

std::vector<ActionKind> Kinds(const std::vector<Action>& actions) {
  std::vector<ActionKind> out;
  for (const Action& a : actions) out.push_back(a.kind);
  return out;
}

// The one action that ends the supervision, checked to be the last.
Action Ending(const std::vector<Action>& actions) {
  EXPECT_FALSE(actions.empty());
  if (actions.empty()) return Action(ActionKind::kAnnounceStop);
  EXPECT_TRUE(actions.back().Ends());
  return actions.back();
}

TEST(Supervisor, NothingHappensWhileStepsComplete) {
  Supervisor s(Config(), kT0);
  for (int i = 1; i <= 100; ++i) {
    EXPECT_TRUE(s.Observe(At(kT0 + i, Job(2, i, kT0 + i))).empty()) << i;
  }
  EXPECT_FALSE(s.ended());
}

TEST(Supervisor, FinishesWhenTheLauncherExitsWellAfterEveryRankSucceeded) {
  Supervisor s(Config(), kT0);
  JobSnapshot j = Job(2, 10, kT0 + 5);
  End(&j, 0, true);
  End(&j, 1, true);
  EXPECT_TRUE(s.Observe(At(kT0 + 5, j)).empty());  // the launcher is still running
  const Action a = Ending(s.Observe(At(kT0 + 6, j, 0, 0)));
  EXPECT_EQ(a.kind, ActionKind::kFinish);
  EXPECT_TRUE(s.ended());
  EXPECT_TRUE(s.Observe(At(kT0 + 7, j, SIGINT)).empty());  // nothing after the end
}

TEST(Supervisor, ALauncherFailureNamesItsExitAndEveryRank) {
  Supervisor s(Config("srun"), kT0);
  JobSnapshot j = Job(3, 4, kT0 + 5);
  End(&j, 1, false, "all_reduce on dp timed out");
  j.ranks[2].step = 0;
  End(&j, 2, false, "no such file");
  const Action a = Ending(s.Observe(At(kT0 + 5, j, 0, 1 << 8)));  // exit status 1
  EXPECT_EQ(a.kind, ActionKind::kFail);
  EXPECT_EQ(a.status.code(), StatusCode::kInternal);
  EXPECT_EQ(a.status.message(),
            "srun (the workers' launcher) exited with status 1"
            "\n  rank 1 (h, pid 11) failed after step 4: all_reduce on dp timed out"
            "\n  rank 2 (h, pid 12) failed before its first step: no such file"
            "\n  rank 0 ended without reporting (hung or killed, or stopped by the others' "
            "failure)");
  EXPECT_EQ(a.ranks, (std::vector<int>{0, 1, 2}));
}

TEST(Supervisor, ALauncherExitingWellBeforeEveryRankSucceededIsAFailure) {
  Supervisor s(Config(), kT0);
  JobSnapshot j = Job(2, 4, kT0 + 5);
  End(&j, 0, true);
  const Action a = Ending(s.Observe(At(kT0 + 5, j, 0, 0)));
  EXPECT_EQ(a.kind, ActionKind::kFail);
  EXPECT_EQ(a.status.message(),
            "mpirun (the workers' launcher) exited with status 0\n  rank 1 ended without "
            "reporting (hung or killed, or stopped by the others' failure)");
  EXPECT_EQ(a.ranks, std::vector<int>{1});
}

TEST(Supervisor, RanksStoppedTogetherOnASignalAreNotAFailure) {
  Supervisor s(Config(), kT0);
  JobSnapshot j = Job(2, 30, kT0 + 5);
  End(&j, 0, false, "", SIGUSR1);
  End(&j, 1, false, "", SIGUSR1);
  const Action a = Ending(s.Observe(At(kT0 + 5, j, 0, (128 + SIGUSR1) << 8)));
  EXPECT_EQ(a.kind, ActionKind::kStopped);
  EXPECT_EQ(a.signal, SIGUSR1);
  EXPECT_EQ(a.step, 30);
}

TEST(Supervisor, RanksStoppedAtDifferentStepsAreAFailure) {
  Supervisor s(Config(), kT0);
  JobSnapshot j = Job(2, 30, kT0 + 5);
  End(&j, 0, false, "stopped", SIGUSR1);
  End(&j, 1, false, "stopped", SIGUSR1);
  j.ranks[1].step = 31;
  EXPECT_EQ(Ending(s.Observe(At(kT0 + 5, j, 0, 138 << 8))).kind, ActionKind::kFail);
}

TEST(Supervisor, WithoutALauncherTheRanksReportsEndIt) {
  {
    Supervisor s(Config(""), kT0);
    JobSnapshot j = Job(2, 10, kT0 + 5);
    End(&j, 0, true);
    EXPECT_TRUE(s.Observe(At(kT0 + 5, j)).empty());  // rank 1 still runs
    End(&j, 1, true);
    EXPECT_EQ(Ending(s.Observe(At(kT0 + 6, j))).kind, ActionKind::kFinish);
  }
  {
    Supervisor s(Config(""), kT0);
    JobSnapshot j = Job(2, 10, kT0 + 5);
    End(&j, 0, true);
    End(&j, 1, false, "out of memory");
    const Action a = Ending(s.Observe(At(kT0 + 5, j)));
    EXPECT_EQ(a.kind, ActionKind::kFail);
    EXPECT_EQ(a.status.message(),
              "workers failed\n  rank 1 (h, pid 11) failed after step 10: out of memory");
  }
  {
    Supervisor s(Config(""), kT0);
    JobSnapshot j = Job(2, 7, kT0 + 5);
    End(&j, 0, false, "", kStopTimeLimit);
    End(&j, 1, false, "", kStopTimeLimit);
    const Action a = Ending(s.Observe(At(kT0 + 5, j)));
    EXPECT_EQ(a.kind, ActionKind::kStopped);
    EXPECT_EQ(a.step, 7);
  }
}

TEST(Supervisor, TheStopSignalIsAnnouncedThenPassedOnOnceEveryRankCompletedAStep) {
  Supervisor s(Config(), kT0);
  EXPECT_EQ(Kinds(s.Observe(At(kT0 + 1, Job(2, 0, kT0 + 1), SIGUSR1))),
            std::vector<ActionKind>{ActionKind::kAnnounceStop});
  EXPECT_TRUE(s.Observe(At(kT0 + 2, Job(2, 0, kT0 + 2))).empty());  // no step yet: not yet
  const std::vector<Action> pass = s.Observe(At(kT0 + 3, Job(2, 1, kT0 + 3)));
  ASSERT_EQ(Kinds(pass), std::vector<ActionKind>{ActionKind::kPassStopSignal});
  EXPECT_EQ(pass[0].signal, SIGUSR1);
  EXPECT_TRUE(s.Observe(At(kT0 + 4, Job(2, 2, kT0 + 4))).empty());  // once
  // The same signal again stops the workers at once.
  const Action a = Ending(s.Observe(At(kT0 + 5, Job(2, 3, kT0 + 5), SIGUSR1)));
  EXPECT_EQ(a.kind, ActionKind::kInterrupt);
  EXPECT_EQ(a.signal, SIGUSR1);
}

TEST(Supervisor, TheStopSignalAfterTheFirstStepIsPassedOnAtOnce) {
  Supervisor s(Config(), kT0);
  EXPECT_EQ(Kinds(s.Observe(At(kT0 + 1, Job(2, 5, kT0 + 1), SIGUSR1))),
            (std::vector<ActionKind>{ActionKind::kAnnounceStop, ActionKind::kPassStopSignal}));
}

TEST(Supervisor, WorkersStartedElsewhereGetTheStopSignalFromTheirOwnLauncher) {
  Supervisor s(Config(""), kT0);
  EXPECT_EQ(Kinds(s.Observe(At(kT0 + 1, Job(2, 5, kT0 + 1), SIGUSR1))),
            std::vector<ActionKind>{ActionKind::kAnnounceStop});
  EXPECT_TRUE(s.Observe(At(kT0 + 2, Job(2, 6, kT0 + 2))).empty());
}

TEST(Supervisor, AnyOtherSignalInterrupts) {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR2}) {
    Supervisor s(Config(), kT0);
    JobSnapshot j = Job(2, 5, kT0 + 1);
    End(&j, 0, true);
    End(&j, 1, true);
    // Before anything else, even a launcher that exited in the same moment.
    const std::vector<Action> actions = s.Observe(At(kT0 + 1, j, sig, 0));
    ASSERT_EQ(actions.size(), 1u);
    EXPECT_EQ(actions[0].kind, ActionKind::kInterrupt);
    EXPECT_EQ(actions[0].signal, sig);
  }
}

TEST(Supervisor, WithoutAStopSignalTheJobsSignalInterrupts) {
  SupervisorConfig c = Config();
  c.stop_signal = 0;
  Supervisor s(c, kT0);
  EXPECT_EQ(Ending(s.Observe(At(kT0 + 1, Job(2, 5, kT0 + 1), SIGUSR1))).kind,
            ActionKind::kInterrupt);
}

TEST(Supervisor, WorkersThatDoNotExitAfterTheEndAreStopped) {
  Supervisor s(Config(), kT0);
  JobSnapshot j = Job(2, 10, kT0 + 10);
  End(&j, 0, true);
  End(&j, 1, true);
  EXPECT_TRUE(s.Observe(At(kT0 + 10, j)).empty());
  EXPECT_TRUE(s.Observe(At(kT0 + 10 + kEndingGraceS, j)).empty());  // not more than 30 s yet
  const Action a = Ending(s.Observe(At(kT0 + 10.5 + kEndingGraceS, j)));
  EXPECT_EQ(a.kind, ActionKind::kFail);
  EXPECT_EQ(a.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(a.status.message(),
            "every rank finished 30 s ago but the workers have not exited; stopping them");
}

TEST(Supervisor, AFailedRanksPeersMustExitWithinTheGrace) {
  Supervisor s(Config(), kT0);
  JobSnapshot j = Job(2, 10, kT0 + 10);
  End(&j, 1, false, "boom");
  EXPECT_TRUE(s.Observe(At(kT0 + 10, j)).empty());
  j.ranks[0].last_contact = kT0 + 40;  // rank 0 still beats, stuck in a collective
  const Action a = Ending(s.Observe(At(kT0 + 41, j)));
  EXPECT_EQ(a.status.message(),
            "a rank failed 30 s ago but the workers have not exited; stopping them"
            "\n  rank 1 (h, pid 11) failed after step 10: boom"
            "\n  rank 0 ended without reporting (hung or killed, or stopped by the others' "
            "failure)");
}

TEST(Supervisor, NoStepForTheSilenceIsAStallNamingTheRanksBehind) {
  Supervisor s(Config(), kT0);
  EXPECT_TRUE(s.Observe(At(kT0 + 1, Job(2, 3, kT0 + 1))).empty());  // step 3 at kT0 + 1
  JobSnapshot j = Job(2, 3, kT0 + 61);                              // heartbeats keep coming
  j.ranks[1].step = 4;  // rank 1 is in step 5, rank 0 still in step 4
  EXPECT_TRUE(s.Observe(At(kT0 + 61, j)).empty());
  j = Job(2, 3, kT0 + 61.5);
  j.ranks[1].step = 4;
  const Action a = Ending(s.Observe(At(kT0 + 61.5, j)));
  EXPECT_EQ(a.kind, ActionKind::kFail);
  EXPECT_EQ(a.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(a.status.message(),
            "no step completed for 60 s (last complete step 3); furthest behind at step 3: rank "
            "0 (h, pid 10)");
  EXPECT_EQ(a.ranks, std::vector<int>{0});
}

TEST(Supervisor, TheStallAllowanceIsTwentySlowestOrPredictedSteps) {
  SupervisorConfig c = Config();
  c.predicted_step_s = 4;  // 80 s
  Supervisor s(c, kT0);
  EXPECT_TRUE(s.Observe(At(kT0, Job(2, 1, kT0))).empty());
  EXPECT_TRUE(s.Observe(At(kT0 + 80, Job(2, 1, kT0 + 80))).empty());
  EXPECT_EQ(Ending(s.Observe(At(kT0 + 81, Job(2, 1, kT0 + 81)))).status.message().substr(0, 30),
            "no step completed for 80 s (la");
  // The slowest step seen counts once seen, even when later steps are faster.
  Supervisor t(Config(), kT0);
  EXPECT_TRUE(t.Observe(At(kT0, Job(2, 1, kT0, /*step_s=*/5))).empty());  // 100 s
  EXPECT_TRUE(t.Observe(At(kT0 + 1, Job(2, 2, kT0 + 1, 0.1))).empty());
  EXPECT_TRUE(t.Observe(At(kT0 + 101, Job(2, 2, kT0 + 101, 0.1))).empty());
  EXPECT_EQ(Ending(t.Observe(At(kT0 + 102, Job(2, 2, kT0 + 102, 0.1)))).kind, ActionKind::kFail);
}

TEST(Supervisor, CheckpointIoExtendsTheAllowanceAndItsEndRestartsTheClock) {
  Supervisor s(Config(), kT0);  // 60 s, plus 1000 s in checkpoint I/O
  JobSnapshot loading = Job(2, 0, kT0);
  loading.ranks[1].checkpoint_io = true;
  EXPECT_TRUE(s.Observe(At(kT0, loading)).empty());
  for (double t = kT0 + 100; t <= kT0 + 1000; t += 100) {
    loading = Job(2, 0, t);
    loading.ranks[1].checkpoint_io = true;
    EXPECT_TRUE(s.Observe(At(t, loading)).empty()) << t;
  }
  // The load ends at kT0 + 1000: the first step gets 60 s from then.
  EXPECT_TRUE(s.Observe(At(kT0 + 1001, Job(2, 0, kT0 + 1001))).empty());
  EXPECT_TRUE(s.Observe(At(kT0 + 1061, Job(2, 0, kT0 + 1061))).empty());
  const Action a = Ending(s.Observe(At(kT0 + 1062, Job(2, 0, kT0 + 1062))));
  EXPECT_EQ(a.status.message(),
            "no step completed for 60 s (none yet); furthest behind at step 0: rank 0 (h, pid "
            "10), 1 (h, pid 11)");
}

TEST(Supervisor, AStallLongerThanTheIoAllowanceIsStillFound) {
  Supervisor s(Config(), kT0);
  JobSnapshot j = Job(2, 0, kT0 + 1061);
  j.ranks[0].checkpoint_io = true;
  EXPECT_TRUE(s.Observe(At(kT0, Job(2, 0, kT0))).empty());
  EXPECT_TRUE(s.Observe(At(kT0 + 1060, j)).empty());
  const Action a = Ending(s.Observe(At(kT0 + 1061, j)));
  EXPECT_EQ(a.status.message().substr(0, 35), "no step completed for 1060 s (none ");
}

TEST(Supervisor, AStallBeforeTheFirstStepOfAJobThatLoadsSaysSo) {
  SupervisorConfig c = Config();
  c.loads_checkpoint = true;
  Supervisor s(c, kT0);
  EXPECT_TRUE(s.Observe(At(kT0, Job(2, 0, kT0))).empty());
  EXPECT_EQ(Ending(s.Observe(At(kT0 + 61, Job(2, 0, kT0 + 61)))).status.message(),
            "no step completed for 60 s (none yet: starting, or loading a checkpoint); furthest "
            "behind at step 0: rank 0 (h, pid 10), 1 (h, pid 11)");
}

TEST(Supervisor, NoStallIsDeclaredWhileRanksRegisterOrAfterTheEnd) {
  Supervisor s(Config(), kT0);
  JobSnapshot j = Job(2, 0, kT0 + 59);
  j.ranks[1].registered = false;
  j.progress.registered = 1;
  EXPECT_TRUE(s.Observe(At(kT0 + 59, j)).empty());  // registering counts as advancing
  j = Job(2, 0, kT0 + 118);
  EXPECT_TRUE(s.Observe(At(kT0 + 118, j)).empty());  // 59 s since the last registration
  // After every rank finished, only the ending grace applies.
  Supervisor t(Config(), kT0);
  JobSnapshot done = Job(2, 5, kT0);
  End(&done, 0, true);
  End(&done, 1, true);
  EXPECT_TRUE(t.Observe(At(kT0, done)).empty());
  EXPECT_TRUE(t.Observe(At(kT0 + kEndingGraceS, done)).empty());
}

TEST(Supervisor, ASilentRankIsNamed) {
  Supervisor s(Config(), kT0);
  JobSnapshot j = Job(2, 2, kT0 + 61);
  j.ranks[1].last_contact = kT0 + 1;
  EXPECT_TRUE(s.Observe(At(kT0 + 61, j)).empty());  // 60 s: not more than the silence
  j.progress.step = 3;  // the job advances (rank 1's last report made step 3 complete)
  j.ranks[0].step = 3;
  j.ranks[1].step = 3;
  j.ranks[0].last_contact = kT0 + 61.5;
  const Action a = Ending(s.Observe(At(kT0 + 61.5, j)));
  EXPECT_EQ(a.kind, ActionKind::kFail);
  EXPECT_EQ(a.status.message(),
            "rank 1 (h, pid 11) has not been heard from for 60 s (last step 3)");
  EXPECT_EQ(a.ranks, std::vector<int>{1});
}

TEST(Supervisor, WorkersThatDoNotRegisterInTimeAreNamed) {
  Supervisor s(Config(), kT0);
  JobSnapshot j = Job(2, 0, kT0 + 60);
  j.ranks[1] = RankStatus{};
  j.progress.registered = 1;
  EXPECT_TRUE(s.Observe(At(kT0 + 60, j)).empty());
  j.ranks[0].last_contact = kT0 + 60.5;
  const Action a = Ending(s.Observe(At(kT0 + 60.5, j)));
  EXPECT_EQ(a.kind, ActionKind::kFail);
  EXPECT_EQ(a.status.message(),
            "1 of 2 workers did not register within 60 s\n  ranks 0, 1 ended without reporting "
            "(hung or killed, or stopped by the others' failure)");
  EXPECT_EQ(a.ranks, std::vector<int>{1});
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// Restarts from in-memory snapshots: a failure with a rank that ended without reporting, after
// a step, while restarts are left, becomes kRestart at the last complete step.
SupervisorConfig RestartConfig(int restarts_left) {
  SupervisorConfig c = Config();
  c.restarts_left = restarts_left;
  return c;
}

TEST(SupervisorRestart, AKilledRankAfterAStepRestarts) {
  Supervisor s(RestartConfig(2), kT0);
  JobSnapshot j = Job(2, 7, kT0 + 1);
  End(&j, 0, false, "all_reduce #9 did not complete within 30000 ms");
  j.ranks[0].peer_failure = true;  // rank 0 timed out waiting for rank 1, which never reports
  const Action a = Ending(s.Observe(At(kT0 + 1, j, 0, 137 << 8)));
  EXPECT_EQ(a.kind, ActionKind::kRestart);
  EXPECT_EQ(a.step, 7);
  EXPECT_FALSE(a.status.ok());
  EXPECT_TRUE(s.ended());
}

TEST(SupervisorRestart, ASilentRankRestartsToo) {
  Supervisor s(RestartConfig(1), kT0);
  JobSnapshot j = Job(2, 3, kT0 + 1);
  j.ranks[1].last_contact = kT0 + 1;
  EXPECT_TRUE(s.Observe(At(kT0 + 2, j)).empty());
  j.ranks[0].last_contact = kT0 + 70;
  const Action a = Ending(s.Observe(At(kT0 + 70, j)));
  EXPECT_EQ(a.kind, ActionKind::kRestart);  // the stall rule sees it first, naming rank 1 too
  EXPECT_NE(std::find(a.ranks.begin(), a.ranks.end(), 1), a.ranks.end());
}

TEST(SupervisorRestart, NoRestartWithoutRestartsLeftBeforeAStepOrForReportedErrors) {
  {  // none left: a failure as before
    Supervisor s(RestartConfig(0), kT0);
    JobSnapshot j = Job(2, 7, kT0 + 1);
    End(&j, 0, false, "x");
    EXPECT_EQ(Ending(s.Observe(At(kT0 + 1, j, 0, 1 << 8))).kind, ActionKind::kFail);
  }
  {  // no step completed: a start-up problem that would only repeat ...
    Supervisor s(RestartConfig(3), kT0);
    JobSnapshot j = Job(2, 0, kT0 + 1);
    End(&j, 0, false, "x");
    j.ranks[0].peer_failure = true;
    EXPECT_EQ(Ending(s.Observe(At(kT0 + 1, j, 0, 1 << 8))).kind, ActionKind::kFail);
    // ... unless the incarnation is itself a restart, which may fail while it restores
    SupervisorConfig c = RestartConfig(3);
    c.restoring = true;
    Supervisor r(c, kT0);
    EXPECT_EQ(Ending(r.Observe(At(kT0 + 1, j, 0, 1 << 8))).kind, ActionKind::kRestart);
  }
  {  // every rank reported its own error (a diverged loss): the same again after a restart
    Supervisor s(RestartConfig(3), kT0);
    JobSnapshot j = Job(2, 7, kT0 + 1);
    End(&j, 0, false, "loss is nan at step 8");
    End(&j, 1, false, "loss is nan at step 8");
    EXPECT_EQ(Ending(s.Observe(At(kT0 + 1, j, 0, 1 << 8))).kind, ActionKind::kFail);
  }
  {  // one rank reported its own error and the launcher killed the other before it reported
    Supervisor s(RestartConfig(3), kT0);
    JobSnapshot j = Job(2, 7, kT0 + 1);
    End(&j, 0, false, "data file truncated");
    EXPECT_EQ(Ending(s.Observe(At(kT0 + 1, j, 0, 1 << 8))).kind, ActionKind::kFail);
  }
  {  // Ctrl-C is never a restart
    Supervisor s(RestartConfig(3), kT0);
    EXPECT_EQ(Ending(s.Observe(At(kT0 + 1, Job(2, 7, kT0 + 1), SIGINT))).kind,
              ActionKind::kInterrupt);
  }
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// The detector's verdicts: announced once each; with detect_action "restart", a restart that
// isolates the node named, when another node is left.
detect::Verdict SlowRank(int rank, int node) {
  detect::Verdict v;
  v.kind = detect::AnomalyKind::kSlowRank;
  v.rank = rank;
  v.node = node;
  v.step = 9;
  v.line = "rank " + std::to_string(rank) + " is slow";
  return v;
}

TEST(SupervisorAnomaly, AVerdictIsAnnouncedThenIsolatesItsNode) {
  SupervisorConfig c = RestartConfig(2);
  c.detect_action = "restart";
  c.nodes_in_use = 4;
  Supervisor s(c, kT0);
  Observation o = At(kT0 + 1, Job(2, 9, kT0 + 1));
  o.anomalies = {SlowRank(1, 3)};
  const std::vector<Action> acts = s.Observe(o);
  ASSERT_EQ(acts.size(), 2u);
  EXPECT_EQ(acts[0].kind, ActionKind::kAnomaly);
  EXPECT_NE(acts[0].status.message().find("slow rank: rank 1 is slow"), std::string::npos);
  EXPECT_EQ(acts[1].kind, ActionKind::kRestart);
  EXPECT_EQ(acts[1].isolate_node, 3);
  EXPECT_EQ(acts[1].ranks, std::vector<int>{1});
  EXPECT_EQ(acts[1].step, 9);
  EXPECT_TRUE(s.ended());
}

TEST(SupervisorAnomaly, OnlyLoggedWithActionLogNoRestartsLeftOrOneNode) {
  for (int variant = 0; variant < 3; ++variant) {
    SupervisorConfig c = RestartConfig(variant == 1 ? 0 : 2);
    c.detect_action = variant == 0 ? "log" : "restart";
    c.nodes_in_use = variant == 2 ? 1 : 4;
    Supervisor s(c, kT0);
    Observation o = At(kT0 + 1, Job(2, 9, kT0 + 1));
    o.anomalies = {SlowRank(0, 0)};
    const std::vector<Action> acts = s.Observe(o);
    ASSERT_EQ(acts.size(), 1u) << variant;
    EXPECT_EQ(acts[0].kind, ActionKind::kAnomaly);
    EXPECT_FALSE(s.ended());
  }
}

}  // namespace
}  // namespace loom
