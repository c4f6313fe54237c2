// Explicit OpenMP/OpenBLAS thread configuration.
#include "core/threads.h"

#include <pthread.h>
#include <time.h>

#include <cblas.h>
#include <dlfcn.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

#include "core/tunables.h"

namespace loom {
namespace {

std::atomic<int> g_threads{1};
}  // namespace

const IntTunable kThreadsTunable =
    RegisterTunable({"LOOM_THREADS", 0, 1, 4096, "threads per rank"});

void ConfigureThreads(int n) {
  n = std::max(1, n);
  g_threads = n;
  omp_set_dynamic(0);
  omp_set_num_threads(n);
  StopBlasServerThreads();
  // Flush denormals to zero on every pool thread: tiny softmax tails and Adam moments otherwise
  // fall into the denormal range late in training and slow every kernel that touches them.
#pragma omp parallel num_threads(n)
  {
    _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
    _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
    // The pool's other threads by name; the calling thread keeps its own.
    if (omp_get_thread_num() != 0) SetThreadName("loom-pool");
  }
}

void StopBlasServerThreads() {
  openblas_set_num_threads(1);
  // An internal OpenBLAS entry point (its fork handler), looked up rather than linked so a BLAS
  // without it still works. With one thread configured no BLAS call restarts the pool, but
  // openblas_set_num_threads does (OpenBLAS 0.3.21), hence the order.
  using Shutdown = int (*)();
  if (auto fn = reinterpret_cast<Shutdown>(dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"))) fn();
}

int NumThreads() {
  return g_threads.load();
}

int DefaultThreads(int local_ranks) {
  if (const int64_t v = TunableOr(kThreadsTunable); v >= 1) return static_cast<int>(v);
  int hw = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, hw / std::max(1, local_ranks));
}

int64_t ThreadCpuNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void SetThreadName(const char* name) {
  char cut[16] = {};
  for (size_t i = 0; i + 1 < sizeof(cut) && name[i] != '\0'; ++i) cut[i] = name[i];
  (void)::pthread_setname_np(::pthread_self(), cut);
}

}  // namespace loom
