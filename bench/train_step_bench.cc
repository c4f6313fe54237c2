// Times one full training step (forward, backward, AdamW) of a GPT in Loom and, in the same run,
// the same model in PyTorch (bench/torch_train_step.py) over torch threads {1,2} x
// OPENBLAS_NUM_THREADS {1,2}, keeping PyTorch's best. Prints medians after warm-up and ends with
//   loom_ms=<x> pytorch_ms=<y> ratio=<x/y> gflops=<achieved> roofline_gflops=<measured sgemm>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/blas_kernels.h"
#include "core/kernels/blas.h"
#include "core/rng.h"
#include "core/threads.h"
#include "model/layout.h"
#include "parallel/zero/param_store.h"
#include "worker/gpt.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double PeakRssMb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

// Best single-call sgemm rate at n = 2048 on the configured pool (the roofline of fp32 training).
double MeasureSgemmGflops() {
  const int64_t n = 2048;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  double best = 0;
  for (int r = 0; r < 4; ++r) {
    auto t0 = Clock::now();
    loom::ParallelGemm<float>(false, true, n, n, n, 1, a.data(), n, b.data(), n, 0, c.data(), n);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n / s / 1e9);
  }
  return best;
}

struct TorchResult {
  double ms = 0, rss_mb = 0;
  int threads = 0, blas = 0;
};

bool RunTorch(const std::string& args, int threads, int blas, TorchResult* out) {
  // OPENBLAS_CORETYPE as Loom picked it (core/blas_kernels.h) is inherited: same kernels.
  std::string cmd = "OPENBLAS_NUM_THREADS=" + std::to_string(blas) + " /usr/bin/python3 " +
                    LOOM_SOURCE_DIR "/bench/torch_train_step.py " + args + " --threads " +
                    std::to_string(threads) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return false;
  char line[512];
  bool ok = false;
  while (std::fgets(line, sizeof(line), p)) {
    double ms, rss;
    if (const char* at = std::strstr(line, "torch_ms=")) {
      if (std::sscanf(at, "torch_ms=%lf", &ms) == 1) {
        const char* r = std::strstr(line, "peak_rss_mb=");
        rss = r ? std::atof(r + 12) : 0;
        *out = {ms, rss, threads, blas};
        ok = true;
      }
    } else {
      std::fputs(line, stderr);
    }
  }
  return pclose(p) == 0 && ok;
}

}  // namespace

int main(int argc, char** argv) {
  loom::UseBestBlasKernels(argv);            // as the loom binary does (core/blas_kernels.h)
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress visible when redirected
  CLI::App app{"Loom vs PyTorch: one GPT training step"};
  int64_t layers = 4, hidden = 256, heads = 8, seq = 256, batch = 8, vocab = 256;
  int warmup = 2, steps = 7, threads = static_cast<int>(std::thread::hardware_concurrency());
  bool skip_torch = false;
  int rounds = 3;
  std::string recompute = "none";
  app.add_option("--layers", layers);
  app.add_option("--hidden", hidden);
  app.add_option("--heads", heads);
  app.add_option("--seq", seq);
  app.add_option("--batch", batch);
  app.add_option("--vocab", vocab);
  app.add_option("--warmup", warmup);
  app.add_option("--steps", steps)->check(CLI::Range(5, 1000));
  app.add_option("--threads", threads);
  app.add_option("--recompute", recompute)->check(CLI::IsMember({"none", "full"}));
  app.add_flag("--skip-torch", skip_torch);
  bool bf16_mode = false;
  app.add_flag("--bf16", bf16_mode,
               "Loom bf16 vs Loom fp32 vs PyTorch autocast bf16 (last line bf16_ms=...)");
  app.add_option("--rounds", rounds, "Alternating Loom/PyTorch rounds")->check(CLI::Range(1, 20));
  CLI11_PARSE(app, argc, argv);

  loom::ConfigureThreads(threads);
  loom::ModelConfig mc{vocab, seq, layers, heads, hidden};
  const loom::ParamLayout layout = loom::ModelLayout(mc, 1);
  std::vector<float> init(static_cast<size_t>(layout.total));
  loom::InitParams(layout, 1234, init.data());
  std::vector<int32_t> tokens(batch * seq), targets(batch * seq);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>(loom::Mix64(i) % vocab);
    targets[i] = static_cast<int32_t>(loom::Mix64(i + 7777777) % vocab);
  }
  // One model per precision, each on its own store from the same initial weights.
  struct Run {
    std::unique_ptr<loom::ParamStore> store;
    std::unique_ptr<loom::Gpt> gpt;
  };
  auto make_run = [&](loom::Precision precision) -> std::unique_ptr<Run> {
    loom::ModelRuntime rt{batch, seq,
                          recompute == "full" ? loom::Recompute::kFull : loom::Recompute::kNone};
    rt.precision = precision;
    auto run = std::make_unique<Run>();
    auto store = loom::MakeParamStore(layout, loom::AdamWConfig{}, loom::ParamStoreOptions{});
    if (!store.ok() || !(*store)->LoadParams(init.data()).ok()) return nullptr;
    run->store = std::move(*store);
    auto model = loom::Gpt::Create(mc, rt, layout, run->store.get());
    if (!model.ok()) {
      std::fprintf(stderr, "bench: %s\n", model.status().ToString().c_str());
      return nullptr;
    }
    run->gpt = std::move(*model);
    return run;
  };
  std::unique_ptr<Run> fp32 = make_run(loom::Precision::kFp32);
  std::unique_ptr<Run> bf16 = bf16_mode ? make_run(loom::Precision::kBf16) : nullptr;
  if (!fp32 || (bf16_mode && !bf16)) return 1;
  std::vector<double> times;
  auto time_run = [&](Run& r) -> bool {
    times.clear();
    for (int s = 0; s < warmup + steps; ++s) {
      auto t0 = Clock::now();
      bool ok = r.store->BeginStep().ok() &&
                r.gpt->ForwardLoss(tokens.data(), targets.data(), batch, seq).ok() &&
                r.gpt->Backward(1.0f / static_cast<float>(batch * seq), true).ok() &&
                r.store->Step(3e-4).ok();
      if (!ok) return false;
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (s >= warmup) times.push_back(ms);
    }
    return true;
  };
  auto time_loom = [&]() { return time_run(*fp32); };
  if (!time_loom()) return 1;
  const double loom_ms = Median(times);
  const double loom_rss = PeakRssMb();
  const double n = static_cast<double>(batch * seq), c = static_cast<double>(hidden);
  // Useful FLOPs: 6 * tokens * matmul params (incl. the tied head) + causal attention (fwd+bwd).
  const double flops = 6.0 * n * (layers * 12.0 * c * c + vocab * c) +
                       6.0 * layers * batch * static_cast<double>(seq * seq) * c;
  std::printf(
      "machine: %u hardware threads; config layers=%lld hidden=%lld heads=%lld seq=%lld "
      "batch=%lld vocab=%lld recompute=%s\n",
      std::thread::hardware_concurrency(), (long long)layers, (long long)hidden, (long long)heads,
      (long long)seq, (long long)batch, (long long)vocab, recompute.c_str());
  std::printf("loom   threads=%d  median %.1f ms/step over %d steps (min %.1f)  peak RSS %.0f MB\n",
              threads, loom_ms, steps, *std::min_element(times.begin(), times.end()), loom_rss);
  char args[256];
  std::snprintf(args, sizeof(args),
                "--layers %lld --hidden %lld --heads %lld --seq %lld --batch %lld --vocab %lld "
                "--warmup %d --steps %d%s",
                (long long)layers, (long long)hidden, (long long)heads, (long long)seq,
                (long long)batch, (long long)vocab, warmup, steps,
                bf16_mode ? " --autocast-bf16" : "");
  if (bf16_mode) {
    // PyTorch autocast's best of threads {1,2} x OPENBLAS_NUM_THREADS {1,2}, then rounds of
    // Loom fp32, Loom bf16 and that PyTorch configuration (the VM's speed drifts over minutes).
    TorchResult best;
    for (int t : {1, 2}) {
      for (int b : {1, 2}) {
        TorchResult r;
        if (!skip_torch && RunTorch(args, t, b, &r) && (best.ms == 0 || r.ms < best.ms)) best = r;
      }
    }
    if (!skip_torch && best.ms == 0) {
      std::fprintf(stderr, "bench: no PyTorch autocast run succeeded\n");
      return 1;
    }
    std::vector<double> f_rounds, b_rounds, t_rounds, ratios;
    for (int round = 0; round < rounds; ++round) {
      if (!time_run(*fp32)) return 1;
      f_rounds.push_back(Median(times));
      if (!time_run(*bf16)) return 1;
      b_rounds.push_back(Median(times));
      TorchResult r;
      if (!skip_torch && !RunTorch(args, best.threads, best.blas, &r)) return 1;
      t_rounds.push_back(r.ms);
      ratios.push_back(b_rounds.back() / f_rounds.back());
      std::printf(
          "round %d: loom fp32 %.1f ms, loom bf16 %.1f ms (ratio %.3f), torch autocast "
          "bf16 (threads=%d blas=%d) %.1f ms\n",
          round + 1, f_rounds.back(), b_rounds.back(), ratios.back(), best.threads, best.blas,
          r.ms);
    }
    std::printf("bf16_ms=%.1f fp32_ms=%.1f ratio=%.3f torch_bf16_ms=%.1f\n", Median(b_rounds),
                Median(f_rounds), Median(ratios), Median(t_rounds));
    return 0;
  }
  TorchResult best;
  double loom_ms_final = loom_ms, ratio = 0;
  if (!skip_torch) {
    for (int t : {1, 2}) {
      for (int b : {1, 2}) {
        TorchResult r;
        if (!RunTorch(args, t, b, &r)) {
          std::fprintf(stderr, "bench: PyTorch run (threads %d, OPENBLAS_NUM_THREADS %d) failed\n",
                       t, b);
          continue;
        }
        std::printf(
            "torch  threads=%d OPENBLAS_NUM_THREADS=%d  median %.1f ms/step  peak RSS %.0f MB\n", t,
            b, r.ms, r.rss_mb);
        if (best.ms == 0 || r.ms < best.ms) best = r;
      }
    }
    if (best.ms == 0) {
      std::fprintf(stderr, "bench: no PyTorch run succeeded\n");
      return 1;
    }
    // The speed of a shared VM drifts by 2x over minutes: alternate Loom and PyTorch's best
    // configuration in rounds and take the median of the per-round ratios.
    std::vector<double> ratios, loom_rounds, torch_rounds;
    for (int round = 0; round < rounds; ++round) {
      times.clear();
      if (!time_loom()) return 1;
      TorchResult r;
      if (!RunTorch(args, best.threads, best.blas, &r)) return 1;
      loom_rounds.push_back(Median(times));
      torch_rounds.push_back(r.ms);
      ratios.push_back(loom_rounds.back() / r.ms);
      std::printf("round %d: loom %.1f ms, torch (threads=%d blas=%d) %.1f ms, ratio %.3f\n",
                  round + 1, loom_rounds.back(), best.threads, best.blas, r.ms, ratios.back());
    }
    loom_ms_final = Median(loom_rounds);
    best.ms = Median(torch_rounds);
    ratio = Median(ratios);
  }
  const double roofline = MeasureSgemmGflops();
  std::printf("peak RSS: loom %.0f MB, pytorch %.0f MB (best config threads=%d blas=%d)\n",
              loom_rss, best.rss_mb, best.threads, best.blas);
  std::printf("loom_ms=%.1f pytorch_ms=%.1f ratio=%.3f gflops=%.1f roofline_gflops=%.1f\n",
              loom_ms_final, best.ms, ratio, flops / (loom_ms_final * 1e-3) / 1e9, roofline);
  return 0;
}
