// fault/inject: the one table of LOOM_FAULT_* variables refuses unknown names and malformed
// values by name, and its points act as the variables say (the ones that can act in-process).
#include "fault/inject.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/fault_point.h"
#include "core/signals.h"
#include "fault/snapshot/segment.h"
#include "fault/snapshot/snapshot_view.h"

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
  for (const Case& c :
       std::vector<Case>{{"LOOM_FAULT_HANG", "1", "RANK:STEP[:MS]"},
                         {"LOOM_FAULT_HANG", "1:0", "RANK:STEP[:MS]"},
                         {"LOOM_FAULT_HANG", "1:2:3:4", "RANK:STEP[:MS]"},
                         {"LOOM_FAULT_HANG", "x:2", "RANK:STEP[:MS]"},
                         {"LOOM_FAULT_CKPT_KILL", "1:3:5", "RANK:N"},
                         {"LOOM_FAULT_CKPT_KILL", "-1:3", "RANK:N"},
                         {"LOOM_FAULT_CKPT_TRACE", "yes", "0|1"},
                         {"LOOM_FAULT_CKPT_SLOW_MS", "5s", "MS"},
                         {"LOOM_FAULT_INTERRUPT_AT", "0", "N"},
                         {"LOOM_FAULT_KILL", "1:2:later", "RANK:STEP[:step|copy|encode|transfer]"},
                         {"LOOM_FAULT_KILL", "1:0", "RANK:STEP[:step|copy"},
                         {"LOOM_FAULT_NODE_DROP", "n1", "NODE[,NODE...]:STEP"},
                         {"LOOM_FAULT_NODE_DROP", ":4", "NODE[,NODE...]:STEP"},
                         {"LOOM_FAULT_NODE_DROP", "a,,b:4", "NODE[,NODE...]:STEP"},
                         {"LOOM_FAULT_SNAPSHOT_DELAY", "1", "RANK:MS"},
                         {"LOOM_FAULT_SNAPSHOT_CORRUPT", "x:parity", "RANK[:parity]"},
                         {"LOOM_FAULT_EPOCH", "-1", "N"}}) {
    setenv(c.name, c.value, 1);
    const Status st = InstallFaultInjection();
    unsetenv(c.name);
    ASSERT_FALSE(st.ok()) << c.name << "=" << c.value;
    EXPECT_NE(
        st.message().find(std::string("environment variable ") + c.name + ": expected " + c.syntax),
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

namespace loom {
namespace {

TEST_F(InjectTest, SnapshotKillsActInTheirIncarnationOnly) {
  setenv("LOOM_FAULT_KILL", "2:5:copy", 1);
  ASSERT_TRUE(InstallFaultInjection().ok());
  unsetenv("LOOM_FAULT_KILL");
  FaultPoint({FaultSite::kSnapshotCopy, 1, 5});    // another rank
  FaultPoint({FaultSite::kSnapshotCopy, 2, 4});    // another step
  FaultPoint({FaultSite::kSnapshotEncode, 2, 5});  // another place
  EXPECT_EXIT(FaultPoint({FaultSite::kSnapshotCopy, 2, 5}), ::testing::KilledBySignal(SIGKILL),
              "rank 2 killed copying its snapshot of step 5");
  SetFaultIdentity(1, "job", "n0");  // a restarted job does not fail the same way again
  FaultPoint({FaultSite::kSnapshotCopy, 2, 5});
  SetFaultIdentity(0, "", "");
}

TEST_F(InjectTest, ANodeDropRemovesTheNodesSnapshotMemory) {
  const std::string job = "injtest" + std::to_string(::getpid());
  SegmentGeometry g;
  g.image_bytes = 100;
  g.piece_bytes = 128;
  ASSERT_TRUE(Segment::Create({job, "n0", 0, 1}, g).ok());
  ASSERT_TRUE(Segment::Create({job, "n1", 0, 3}, g).ok());
  ASSERT_TRUE(Segment::Create({job, "n2", 0, 4}, g).ok());
  setenv("LOOM_FAULT_NODE_DROP", "n0,n1:7", 1);
  ASSERT_TRUE(InstallFaultInjection().ok());
  unsetenv("LOOM_FAULT_NODE_DROP");
  SetFaultIdentity(0, job, "n2");
  FaultPoint({FaultSite::kBeforeStep, 4, 7});  // another node: nothing
  SetFaultIdentity(0, job, "n1");
  FaultPoint({FaultSite::kBeforeStep, 3, 6});  // another step: nothing
  EXPECT_EXIT(FaultPoint({FaultSite::kBeforeStep, 3, 7}), ::testing::KilledBySignal(SIGKILL),
              "node n1 dropped before step 7 \\(rank 3: 2 snapshot segments removed\\)");
  // Both named nodes' memory is gone, though no rank of n0 got to step 7.
  EXPECT_EQ(Segment::Open({job, "n0", 0, 1}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Segment::Open({job, "n1", 0, 3}).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Segment::Open({job, "n2", 0, 4}).ok());
  SetFaultIdentity(0, "", "");
  EXPECT_TRUE(RemoveSegments(JobSegmentPrefix(job)).ok());
}

TEST_F(InjectTest, ACorruptionIsFoundByTheRestoreOfTheNextIncarnation) {
  const std::string job = "injtest" + std::to_string(::getpid());
  SegmentGeometry g;
  g.image_bytes = 1000;
  g.piece_bytes = 1024;
  Result<Segment> seg = Segment::Create({job, "n1", 0, 6}, g);
  ASSERT_TRUE(seg.ok());
  ASSERT_TRUE(seg->Begin(1, 12, "").ok());
  const std::vector<uint32_t> crcs = seg->Seal(1, 1000);
  setenv("LOOM_FAULT_SNAPSHOT_CORRUPT", "6", 1);
  ASSERT_TRUE(InstallFaultInjection().ok());
  unsetenv("LOOM_FAULT_SNAPSHOT_CORRUPT");
  SnapshotView view{{{6, &*seg}}};
  FaultPoint({FaultSite::kSnapshotRestore, 0, 0, "", &view});  // epoch 0: not a restore
  EXPECT_TRUE(seg->PieceIntact(1, seg->ReadSlot(1), 0));
  SetFaultIdentity(1, job, "n1");
  FaultPoint({FaultSite::kSnapshotRestore, 0, 0, "", &view});
  EXPECT_FALSE(seg->PieceIntact(1, seg->ReadSlot(1), 0));
  SetFaultIdentity(0, "", "");
  EXPECT_TRUE(RemoveSegments(JobSegmentPrefix(job)).ok());
}

}  // namespace
}  // namespace loom
