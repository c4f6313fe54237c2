// Launcher command lines.
#include "coordinator/service/launcher.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

namespace loom {
namespace {

TEST(Launcher, MpirunSrunAndNone) {
  LaunchCommand c;
  c.world = 4;
  c.loom = "/opt/loom";
  c.oversubscribe = true;
  c.as_root = true;
  c.threads = 1;
  EXPECT_EQ(LauncherArgv(c),
            (std::vector<std::string>{"mpirun", "-np", "4", "--oversubscribe",
                                      "--allow-run-as-root", "-x", "LOOM_COORDINATOR", "-x",
                                      "LOOM_JOB_TOKEN", "/opt/loom", "worker", "--threads", "1"}));
  c.kind = LauncherKind::kMpirun;
  c.hostfile = "/tmp/hosts";
  c.oversubscribe = false;
  c.as_root = false;
  c.threads = 0;
  EXPECT_EQ(LauncherArgv(c), (std::vector<std::string>{"mpirun", "-np", "4", "--hostfile",
                                                       "/tmp/hosts", "-x", "LOOM_COORDINATOR", "-x",
                                                       "LOOM_JOB_TOKEN", "/opt/loom", "worker"}));
  c.kind = LauncherKind::kSrun;
  EXPECT_EQ(LauncherArgv(c), (std::vector<std::string>{"srun", "--mpi=pmix", "-n", "4",
                                                       "--export=ALL", "/opt/loom", "worker"}));
  c.kind = LauncherKind::kNone;
  EXPECT_TRUE(LauncherArgv(c).empty());
}

TEST(Launcher, ParseAndDescribe) {
  EXPECT_EQ(*ParseLauncher("srun"), LauncherKind::kSrun);
  auto bad = ParseLauncher("pbs");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected mpirun, srun or none, got 'pbs'"),
            std::string::npos);
  EXPECT_EQ(DescribeExit(3 << 8), "exited with status 3");
  EXPECT_NE(DescribeExit(9).find("killed by signal 9"), std::string::npos);
}

TEST(Launcher, StopEndsTheWholeProcessGroup) {
  // A shell that starts a child and waits: stopping the group must end both.
  auto p = WorkerProcesses::Start({"/bin/sh", "-c", "sleep 300 & wait"}, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  int status = 0;
  EXPECT_FALSE(p->Exited(&status));
  p->Stop(2000);
  EXPECT_TRUE(p->Exited(&status));
  // No process of the group is left (the orphaned child may take a moment to be reaped).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (::kill(-p->pid(), 0) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(::kill(-p->pid(), 0), 0);
}

}  // namespace
}  // namespace loom
