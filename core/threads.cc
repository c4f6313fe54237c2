// Explicit OpenMP/OpenBLAS thread configuration.
#include "core/threads.h"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

namespace loom {
namespace {
std::atomic<int> g_threads{1};
}

void ConfigureThreads(int n) {
  n = std::max(1, n);
  g_threads = n;
  omp_set_dynamic(0);
  omp_set_num_threads(n);
  openblas_set_num_threads(1);
  // Flush denormals to zero on every pool thread: tiny softmax tails and Adam moments otherwise
  // fall into the denormal range late in training and slow every kernel that touches them.
#pragma omp parallel num_threads(n)
  {
    _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
    _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
  }
}

int NumThreads() {
  return g_threads.load();
}

int DefaultThreads(int local_ranks) {
  if (const char* env = std::getenv("LOOM_THREADS")) {
    int v = std::atoi(env);
    if (v >= 1) return v;
  }
  int hw = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, hw / std::max(1, local_ranks));
}

}  // namespace loom
