// core/affinity: a host's CPUs split between its ranks, and a thread pinned to its share
// (with the threads it starts later; one started before keeps its CPUs).
#include "core/affinity.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace loom {
namespace {

TEST(CoreShare, BlocksWhenThereAreEnoughCpus) {
  const std::vector<int> cpus = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(CoreShare(cpus, 0, 4), (std::vector<int>{0, 1}));
  EXPECT_EQ(CoreShare(cpus, 3, 4), (std::vector<int>{6, 7}));
  // Uneven: every CPU in exactly one share, the shares differing by at most one.
  std::vector<int> seen;
  for (int s = 0; s < 3; ++s) {
    const std::vector<int> part = CoreShare(cpus, s, 3);
    EXPECT_GE(part.size(), 2u);
    EXPECT_LE(part.size(), 3u);
    seen.insert(seen.end(), part.begin(), part.end());
  }
  EXPECT_EQ(seen, cpus);
  // The ids of the allowed set, not 0..n-1.
  EXPECT_EQ(CoreShare({4, 5, 9, 12}, 1, 2), (std::vector<int>{9, 12}));
}

TEST(CoreShare, ConsecutiveSharesOnOneCpuWhenCpusAreFewer) {
  // 8 ranks of 4 logical nodes on 2 CPUs: nodes 0 and 1 on CPU 0, 2 and 3 on CPU 1.
  const std::vector<int> cpus = {0, 1};
  for (int s = 0; s < 8; ++s) EXPECT_EQ(CoreShare(cpus, s, 8), (std::vector<int>{s / 4})) << s;
  // Uneven: 5 shares on 2 CPUs, 3 and 2.
  EXPECT_EQ(CoreShare(cpus, 2, 5), (std::vector<int>{0}));
  EXPECT_EQ(CoreShare(cpus, 3, 5), (std::vector<int>{1}));
  EXPECT_EQ(CoreShare({3, 7, 9}, 6, 7), (std::vector<int>{9}));
}

TEST(CoreShare, NothingToSplit) {
  EXPECT_TRUE(CoreShare({0, 1}, 0, 1).empty());
  EXPECT_TRUE(CoreShare({0, 1}, 2, 2).empty());
  EXPECT_TRUE(CoreShare({0, 1}, -1, 2).empty());
  EXPECT_TRUE(CoreShare({}, 0, 2).empty());
}

TEST(CoreShare, CpuListString) {
  EXPECT_EQ(CpuListString({0, 1, 2, 3, 6, 8, 9}), "0-3,6,8-9");
  EXPECT_EQ(CpuListString({5}), "5");
  EXPECT_EQ(CpuListString({}), "");
}

std::vector<int> CpusOfThread(pid_t tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(tid, sizeof(set), &set) != 0) return {-1};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// In a child process, so this one keeps its CPUs. The child's exit status says what went wrong.
// `srun_task`: as a task of srun that Slurm did not bind (task/none: every CPU allowed).
void ExpectLastSharePinned(bool srun_task) {
  Result<std::vector<int>> allowed = AllowedCpus();
  ASSERT_TRUE(allowed.ok()) << allowed.status().ToString();
  const bool whole_host = static_cast<long>(allowed->size()) == sysconf(_SC_NPROCESSORS_ONLN);
  const int shares = static_cast<int>(allowed->size()) + 1;  // the last share: one CPU
  const std::vector<int> want =
      whole_host ? CoreShare(*allowed, shares - 1, shares) : std::vector<int>{};
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (srun_task) {
      setenv("SLURM_STEP_ID", "0", 1);
    } else {
      unsetenv("SLURM_STEP_ID");  // whatever runs the tests
    }
    unsetenv("LOOM_PIN_CORES");
    std::atomic<pid_t> tid{0};
    std::atomic<bool> stop{false};
    std::thread early([&] {  // running before the pinning: keeps its CPUs
      tid = static_cast<pid_t>(syscall(SYS_gettid));
      while (!stop) std::this_thread::yield();
    });
    while (tid == 0) std::this_thread::yield();
    Result<std::vector<int>> got = PinToCoreShare(shares - 1, shares);
    int code = 0;
    if (!got.ok() || *got != want) {
      code = 2;
    } else if (whole_host) {
      std::vector<int> late_cpus;
      std::thread late([&] { late_cpus = CpusOfThread(0); });  // started after: inherits
      late.join();
      if (CpusOfThread(0) != want) code = 3;
      if (CpusOfThread(tid) != *allowed) code = 4;
      if (late_cpus != want) code = 5;
    } else if (CpusOfThread(0) != *allowed) {
      code = 6;  // placed by someone else: left alone
    }
    stop = true;
    early.join();
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "2: wrong CPUs returned, 3: this thread not pinned, 4: a thread started before was "
         "moved, 5: one started after not pinned, 6: an already placed thread was moved";
}

TEST(PinToCoreShare, TheThreadAndThoseItStartsGetTheLastShare) {
  ExpectLastSharePinned(/*srun_task=*/false);
}

// Unbound by Slurm, srun's tasks are split as mpirun's are; bound (--cpu-bind, task/affinity),
// their CPUs are narrower than the host's and they are left alone (checked above: code 6).
TEST(PinToCoreShare, AnSrunTaskSlurmDidNotBindIsPinned) {
  ExpectLastSharePinned(/*srun_task=*/true);
}

// In a child with `var` set to `value` (the environment and the CPUs change there only),
// PinToCoreShare(0, 2) must leave the thread alone. The child's exit status: 0 if it did, 2 if it
// pinned, 3 if the thread's CPUs changed anyway.
void ExpectLeftAloneWith(const char* var, const char* value) {
  Result<std::vector<int>> allowed = AllowedCpus();
  ASSERT_TRUE(allowed.ok());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv(var, value, 1);
    Result<std::vector<int>> got = PinToCoreShare(0, 2);
    _exit(!got.ok() || !got->empty() ? 2 : CpusOfThread(0) != *allowed ? 3 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << var << "=" << value << ": 2: it pinned, 3: CPUs changed";
}

TEST(PinToCoreShare, LoomPinCoresZeroLeavesTheThreadAlone) {
  ExpectLeftAloneWith("LOOM_PIN_CORES", "0");
}

TEST(PinToCoreShare, OneShareLeavesTheProcessAlone) {
  Result<std::vector<int>> got = PinToCoreShare(0, 1);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->empty());
}

}  // namespace
}  // namespace loom
