// core/threads: OpenBLAS's server threads are stopped and stay stopped, and BLAS still works;
// threads are named as `top -H` shows them.
#include "core/threads.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <pthread.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/kernels/blas.h"

namespace loom {
namespace {

int ThreadsOfThisProcess() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

// The count once threads that are exiting are gone: a thread just joined can still be listed in
// /proc for a moment (its exit finishes after it wakes the joiner). Waits up to 2 s for `want`.
int SettledThreads(int want) {
  int n = ThreadsOfThisProcess();
  for (int i = 0; i < 200 && n != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    n = ThreadsOfThisProcess();
  }
  return n;
}

TEST(Threads, BlasServerThreadsStopAndGemmStillWorks) {
  const int before = ThreadsOfThisProcess();
  ASSERT_GT(before, 0);
  StopBlasServerThreads();
  const int after = SettledThreads(1);
  // The pthread build of OpenBLAS starts (cores - 1) threads when it loads; none remain, and
  // this test process has started none of its own.
  EXPECT_EQ(after, 1) << before << " threads before";
  ConfigureThreads(1);  // must not restart them either
  const int configured = SettledThreads(1);
  // A GEMM big enough that a threaded BLAS would split it, checked against a plain loop.
  const int m = 96, n = 80, k = 64;
  std::vector<double> a(m * k), b(k * n), c(m * n, 0), ref(m * n, 0);
  for (int i = 0; i < m * k; ++i) a[i] = (i % 7) - 3.0;
  for (int i = 0; i < k * n; ++i) b[i] = (i % 5) - 2.0;
  Gemm(false, false, m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, c.data(), n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      for (int l = 0; l < k; ++l) ref[i * n + j] += a[i * k + l] * b[l * n + j];
    }
  }
  EXPECT_EQ(c, ref);
  EXPECT_EQ(SettledThreads(configured), configured);  // the GEMM started no BLAS threads
  EXPECT_EQ(configured, 1);                           // nor did ConfigureThreads(1)
}

std::string NameOf(pthread_t t) {
  char name[64] = {};
  if (pthread_getname_np(t, name, sizeof(name)) != 0) return "?";
  return name;
}

// Names of every thread of this process, as /proc shows them.
std::vector<std::string> ThreadNames() {
  std::vector<std::string> out;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    std::getline(f, name);
    out.push_back(name);
  }
  closedir(d);
  return out;
}

TEST(Threads, SetThreadNameNamesTheCallingThreadCutTo15Characters) {
  std::string short_name, long_name;
  std::thread([&] {
    SetThreadName("loom-comm");
    short_name = NameOf(pthread_self());
    SetThreadName("loom-a-name-longer-than-fifteen");
    long_name = NameOf(pthread_self());
  }).join();
  EXPECT_EQ(short_name, "loom-comm");
  EXPECT_EQ(long_name, "loom-a-name-lon");         // the kernel keeps 15 characters
  EXPECT_NE(NameOf(pthread_self()), "loom-comm");  // another thread's name is its own
}

TEST(Threads, PoolThreadsAreNamedAndTheCallerKeepsItsName) {
  const std::string caller = NameOf(pthread_self());
  ConfigureThreads(3);
  int pool = 0;
  for (const std::string& n : ThreadNames()) pool += n == "loom-pool";
  EXPECT_EQ(pool, 2);  // the pool's threads other than the caller
  EXPECT_EQ(NameOf(pthread_self()), caller);
  ConfigureThreads(1);
}

}  // namespace
}  // namespace loom
