// core/threads: OpenBLAS's server threads are stopped and stay stopped, and BLAS still works.
#include "core/threads.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <chrono>
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

}  // namespace
}  // namespace loom
