// fault/inject: the one table of LOOM_FAULT_* variables refuses unknown names and malformed
// values by name, and its points act as the variables say (the ones that can act in-process).
#include "fault/inject.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/fault_point.h"
#include "core/signals.h"

namespace loom {
namespace {

class InjectTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const FaultVariable& v : FaultVariables()) unsetenv(v.name);
    unsetenv("LOOM_FAULT_CKPT_KIL");
    SetFaultHandler(nullptr);
  }
};

TEST_F(InjectTest, NothingSetInstallsNothing) {
  ASSERT_TRUE(InstallFaultInjection().ok());
  ::testing::internal::CaptureStderr();
  FaultPoint({FaultSite::kCheckpointCrashPoint, 0, 0, "anywhere"});
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST_F(InjectTest, UnknownVariableIsRefusedByName) {
  setenv("LOOM_FAULT_CKPT_KIL", "1:3", 1);  // a typo of LOOM_FAULT_CKPT_KILL
  const Status st = InstallFaultInjection();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("environment variable LOOM_FAULT_CKPT_KIL: not a fault-injection "
                              "variable (expected one of LOOM_FAULT_HANG, LOOM_FAULT_CKPT_KILL"),
            std::string::npos)
      << st.message();
}

TEST_F(InjectTest, MalformedValuesAreRefusedWithTheSyntax) {
  struct Case {
    const char *name, *value, *syntax;
  };
  for (const Case& c : std::vector<Case>{{"LOOM_FAULT_HANG", "1", "RANK:STEP[:MS]"},
                                         {"LOOM_FAULT_HANG", "1:0", "RANK:STEP[:MS]"},
                                         {"LOOM_FAULT_HANG", "1:2:3:4", "RANK:STEP[:MS]"},
                                         {"LOOM_FAULT_HANG", "x:2", "RANK:STEP[:MS]"},
                                         {"LOOM_FAULT_CKPT_KILL", "1:3:5", "RANK:N"},
                                         {"LOOM_FAULT_CKPT_KILL", "-1:3", "RANK:N"},
                                         {"LOOM_FAULT_CKPT_TRACE", "yes", "0|1"},
                                         {"LOOM_FAULT_CKPT_SLOW_MS", "5s", "MS"},
                                         {"LOOM_FAULT_INTERRUPT_AT", "0", "N"}}) {
    setenv(c.name, c.value, 1);
    const Status st = InstallFaultInjection();
    unsetenv(c.name);
    ASSERT_FALSE(st.ok()) << c.name << "=" << c.value;
    EXPECT_NE(st.message().find(std::string("environment variable ") + c.name + ": expected " +
                                c.syntax),
              std::string::npos)
        << st.message();
    EXPECT_NE(st.message().find(std::string("got '") + c.value + "'"), std::string::npos);
  }
}

TEST_F(InjectTest, CrashPointsAreCountedAndTraced) {
  setenv("LOOM_FAULT_CKPT_TRACE", "1", 1);
  setenv("LOOM_FAULT_CKPT_KILL", "7:100", 1);  // another rank: only traced here
  ASSERT_TRUE(InstallFaultInjection().ok());
  ::testing::internal::CaptureStderr();
  FaultPoint({FaultSite::kCheckpointCrashPoint, 3, 0, "before the rename"});
  FaultPoint({FaultSite::kBeforeStep, 3, 1});  // no hang configured for rank 3
  FaultPoint({FaultSite::kCheckpointCrashPoint, 3, 0, "after the index fragment"});
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("checkpoint crash point 1 on rank 3 (before the rename)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("checkpoint crash point 2 on rank 3 (after the index fragment)"),
            std::string::npos)
      << out;
}

TEST_F(InjectTest, InterruptAtTheNthCheck) {
  setenv("LOOM_FAULT_INTERRUPT_AT", "2", 1);
  ASSERT_TRUE(InstallFaultInjection().ok());
  RecordSignals({SIGINT}, OnRepeat::kRecordAgain, IfIgnored::kTakeOver);
  const int before = SignalCount(SIGINT);
  FaultPoint({FaultSite::kInterruptCheck});
  EXPECT_EQ(SignalCount(SIGINT), before);
  FaultPoint({FaultSite::kInterruptCheck});
  EXPECT_EQ(SignalCount(SIGINT), before + 1);
}

}  // namespace
}  // namespace loom
