// The stop signal: names both ways, exit codes, and its record (a second one is fatal, so a
// second install does not re-arm it).
#include "core/stop_signal.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace loom {
namespace {

TEST(StopSignal, NamesParseAnyCaseWithOrWithoutSig) {
  for (const auto& [name, sig] : std::vector<std::pair<std::string, int>>{{"SIGUSR1", SIGUSR1},
                                                                          {"usr2", SIGUSR2},
                                                                          {"SigTerm", SIGTERM},
                                                                          {"INT", SIGINT},
                                                                          {"none", 0}}) {
    Result<int> got = ParseStopSignal(name, "f");
    ASSERT_TRUE(got.ok()) << name;
    EXPECT_EQ(*got, sig) << name;
  }
  Result<int> bad = ParseStopSignal("SIGHUP", "job.yaml:3: field 'checkpoint.signal'");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "job.yaml:3: field 'checkpoint.signal': expected SIGUSR1, SIGUSR2, SIGTERM, SIGINT or "
            "none, got 'SIGHUP'");
  EXPECT_EQ(StopSignalName(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(StopSignalName(kStopTimeLimit), "the time limit");
  EXPECT_EQ(StopSignalName(0), "none");
  EXPECT_EQ(StopSignalName(SIGHUP), "signal " + std::to_string(SIGHUP));
}

TEST(StopSignal, ExitCodes) {
  EXPECT_EQ(StopExitCode(0), 0);
  EXPECT_EQ(StopExitCode(SIGUSR1), 128 + SIGUSR1);
  EXPECT_EQ(StopExitCode(SIGTERM), 143);
  EXPECT_EQ(StopExitCode(kStopTimeLimit), 75);
}

TEST(StopSignal, RecordedOnceThenFatal) {
  InstallStopSignal(0);  // none: nothing installed
  EXPECT_EQ(PendingStopSignal(), 0);
  InstallStopSignal(SIGUSR2);
  InstallStopSignal(SIGUSR2);  // again, as the trainer does: still armed
  EXPECT_EQ(PendingStopSignal(), 0);
  ::raise(SIGUSR2);
  EXPECT_EQ(PendingStopSignal(), SIGUSR2);
  struct sigaction sa {};
  ::sigaction(SIGUSR2, nullptr, &sa);
  EXPECT_EQ(sa.sa_handler, SIG_DFL);
  InstallStopSignal(SIGUSR2);  // not re-armed once one came
  ::sigaction(SIGUSR2, nullptr, &sa);
  EXPECT_EQ(sa.sa_handler, SIG_DFL);
  EXPECT_EQ(PendingStopSignal(), SIGUSR2);
}

}  // namespace
}  // namespace loom
