// How much this machine's own speed moves while nothing else changes: one thread per core runs
// the same single-threaded GEMM (the demo model's MLP shape, 512 x 1024 x 256, what most of a demo
// step is) back to back for --seconds, and the rate of every --block seconds (a short launch's
// measured stretch) is compared with the run's median. No MPI, no Loom training: what moves here
// is the machine (host scheduling, frequency, other tenants of a VM), and it bounds how close any
// prediction made before a run can be to the run. Prints the blocks, then
//   drift_median_gflops=<x> drift_min_ratio=<min/median> drift_max_ratio=<max/median>
//   drift_within_15pct=<share of blocks within +-15 % of the median>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "core/blas_kernels.h"
#include "core/kernels/blas.h"
#include "core/threads.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  loom::UseBestBlasKernels(argv);  // OpenBLAS picks SSE3 kernels on VMs that hide the CPU
  CLI::App app{"Measure how this machine's GEMM rate drifts over time"};
  double seconds = 600, block = 15;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("--seconds", seconds, "How long to measure")->check(CLI::Range(2.0, 86400.0));
  app.add_option("--block", block, "Seconds per block")->check(CLI::Range(0.5, 3600.0));
  app.add_option("--threads", threads, "Threads (one GEMM each)")->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);
  loom::ConfigureThreads(1);  // OpenBLAS single-threaded: each thread runs its own GEMMs

  constexpr int64_t kM = 512, kN = 1024, kK = 256;
  constexpr double kFlops = 2.0 * kM * kN * kK;
  const int blocks = std::max(1, static_cast<int>(seconds / block));
  // gemms[b]: GEMMs finished in block b, over all threads.
  std::vector<std::atomic<int64_t>> gemms(blocks);
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<float> a(kM * kK, 0.01f * (t + 1)), b(kK * kN, 0.02f), c(kM * kN);
      for (;;) {
        loom::Gemm<float>(false, false, kM, kN, kK, 1.0f, a.data(), kK, b.data(), kN, 0.0f,
                          c.data(), kN);
        const double at = std::chrono::duration<double>(Clock::now() - start).count();
        const int i = static_cast<int>(at / block);
        if (i >= blocks) break;
        gemms[i].fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& th : pool) th.join();

  std::vector<double> rate(blocks);
  for (int i = 0; i < blocks; ++i) rate[i] = gemms[i].load() * kFlops / block / 1e9;
  const double med = Median(rate);
  const auto [lo, hi] = std::minmax_element(rate.begin(), rate.end());
  int within = 0;
  std::printf("threads %d, GEMM %lldx%lldx%lld fp32, %d blocks of %.1f s\n", threads,
              static_cast<long long>(kM), static_cast<long long>(kN), static_cast<long long>(kK),
              blocks, block);
  std::printf("%8s %12s %10s\n", "block", "GFLOP/s", "/median");
  for (int i = 0; i < blocks; ++i) {
    within += rate[i] >= 0.85 * med && rate[i] <= 1.15 * med;
    std::printf("%8d %12.1f %10.3f\n", i, rate[i], rate[i] / med);
  }
  std::printf(
      "drift_median_gflops=%.1f drift_min_ratio=%.3f drift_max_ratio=%.3f "
      "drift_within_15pct=%.2f\n",
      med, *lo / med, *hi / med, static_cast<double>(within) / blocks);
  return 0;
}
