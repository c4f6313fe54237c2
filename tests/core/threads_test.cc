// core/threads: OpenBLAS's server threads are stopped and stay stopped, and BLAS still works.
#include "core/threads.h"

#include <dirent.h>
#include <gtest/gtest.h>

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

TEST(Threads, BlasServerThreadsStopAndGemmStillWorks) {
  const int before = ThreadsOfThisProcess();
  ASSERT_GT(before, 0);
  StopBlasServerThreads();
  const int after = ThreadsOfThisProcess();
  // The pthread build of OpenBLAS starts (cores - 1) threads when it loads; none remain, and
  // this test process has started none of its own.
  EXPECT_EQ(after, 1) << before << " threads before";
  ConfigureThreads(1);  // must not restart them either
  const int configured = ThreadsOfThisProcess();
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
  EXPECT_EQ(ThreadsOfThisProcess(), configured);  // the GEMM started no BLAS threads
  EXPECT_EQ(configured, 1);                       // nor did ConfigureThreads(1)
}

}  // namespace
}  // namespace loom
