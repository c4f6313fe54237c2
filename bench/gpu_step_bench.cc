// Times the single-GPU training step (worker/cuda/gpu_gpt.h: forward, backward, clipping, AdamW,
// synchronised) of a GPT, GPT-2 124M by default, and the same model and step in PyTorch on the
// same GPU (bench/torch_train_step.py --device cuda) when PyTorch has CUDA. Prints the device,
// tokens/s and MFU, the allocator's memory per category, and ends with
//   gpu_ms=<median ms> tokens_per_s=<x> mfu=<fraction> torch_ms=<ms|nan> ratio=<gpu/torch|nan>
// Without a CUDA device it prints "no CUDA device: skipped" and exits 0, so a script can run it
// anywhere.
//
// MFU = (6 * matmul parameters * tokens + causal attention) / step time / peak, with matmul
// parameters = 12 * layers * hidden^2 + vocab * hidden (the tied head counted; embedding
// look-ups, biases and norms not) and attention = 6 * layers * batch * seq^2 * hidden (QK^T and
// AV, forward and backward, half of the square by causality) -- bench/train_step_bench.cc's count.
// The peak is a flag (dense tensor-core bf16, TF32, or fp32 non-tensor), H100 SXM by default.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda/device.h"
#include "core/cuda/runtime.h"
#include "core/rng.h"
#include "model/config.h"
#include "parallel/zero/param_store.h"
#include "worker/cuda/gpu_gpt.h"
#include "worker/gpt.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Mib(int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

// Runs `cmd` (stderr folded in), returning its output and whether it exited 0.
bool RunCapture(const std::string& cmd, std::string* out) {
  out->clear();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return false;
  char line[1024];
  while (std::fgets(line, sizeof(line), p)) *out += line;
  return pclose(p) == 0;
}

// The last line of a command's output, for a one-line reason.
std::string LastLine(const std::string& text) {
  std::string s = text;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  const size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

// The first of `candidates` that exists ("" when none does).
std::string FirstExisting(const std::vector<std::string>& candidates) {
  for (const std::string& c : candidates) {
    if (!c.empty() && access(c.c_str(), R_OK) == 0) return c;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress visible when redirected
  CLI::App app{"Loom single-GPU training step vs PyTorch on the same GPU"};
  int64_t layers = 12, hidden = 768, heads = 12, seq = 1024, batch = 8, vocab = 50257;
  int64_t vocab_chunk = 8192;
  int warmup = 3, steps = 10;
  std::string precision_name = "bf16", tf32 = "default", attention = "gemm", torch_script, python;
  double peak_bf16 = 989, peak_tf32 = 494, peak_fp32 = 67;
  bool skip_torch = false;
  app.add_option("--layers", layers);
  app.add_option("--hidden", hidden);
  app.add_option("--heads", heads);
  app.add_option("--seq", seq, "tokens per sequence (also the model's max_seq)");
  app.add_option("--batch", batch, "sequences per step (one micro-batch)");
  app.add_option("--vocab", vocab);
  app.add_option("--vocab-chunk", vocab_chunk, "vocabulary rows per cross-entropy chunk");
  app.add_option("--precision", precision_name)->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--tf32", tf32,
                 "TF32 for the fp32 GEMMs: all of them under fp32 (also in PyTorch), attention's "
                 "under bf16; default: off under fp32, on under bf16")
      ->check(CLI::IsMember({"default", "on", "off"}));
  app.add_option("--torch-script", torch_script,
                 "bench/torch_train_step.py (default: the source tree's, else ./bench/'s)");
  app.add_option("--python", python,
                 "the Python with PyTorch (default: /usr/bin/python3, else python3 on PATH)");
  app.add_option("--warmup", warmup)->check(CLI::Range(1, 1000));
  app.add_option("--steps", steps)->check(CLI::Range(1, 1000));
  app.add_option("--peak-bf16-tflops", peak_bf16, "dense bf16 peak (H100 SXM: 989)");
  app.add_option("--peak-tf32-tflops", peak_tf32, "dense TF32 peak (H100 SXM: 494)");
  app.add_option("--peak-fp32-tflops", peak_fp32, "fp32 non-tensor peak (H100 SXM: 67)");
  app.add_flag("--skip-torch", skip_torch);
  app.add_option("--attention", attention,
                 "gemm: batched GEMMs over [heads, T, T] scores (the default, where they fit); "
                 "flash: the flash-style kernels")
      ->check(CLI::IsMember({"gemm", "flash"}));
  CLI11_PARSE(app, argc, argv);

  if (loom::cuda::DeviceCount() == 0) {
    std::printf("no CUDA device: skipped\n");
    return 0;
  }
  auto fail = [](const char* what, const loom::Status& st) {
    std::fprintf(stderr, "gpu_step_bench: %s: %s\n", what, st.ToString().c_str());
    return 1;
  };
  auto rank = loom::cuda::LocalRankFromEnv();
  if (!rank.ok()) return fail("local rank", rank.status());
  auto device = loom::cuda::SelectDevice(*rank);
  if (!device.ok()) return fail("select device", device.status());
  auto info = loom::cuda::CurrentDeviceInfo();
  if (!info.ok()) return fail("device info", info.status());
  std::printf("device %d: %s (compute %d.%d, %d SMs, %.1f GiB, %.1f GiB free)\n", info->index,
              info->name.c_str(), info->major, info->minor, info->multiprocessors,
              Mib(info->total_bytes) / 1024, Mib(info->free_bytes) / 1024);

  const bool bf16 = precision_name == "bf16";
  // TF32: under fp32 for every GEMM (off by default, also in PyTorch), under bf16 for the
  // attention's fp32 GEMMs only (on by default; GpuGpt::set_allow_tf32).
  const bool use_tf32 = tf32 == "on" || (tf32 == "default" && bf16);
  const loom::ModelConfig mc{vocab, seq, layers, heads, hidden};
  loom::ModelRuntime rt{batch, seq, loom::Recompute::kNone, vocab_chunk};
  rt.precision = bf16 ? loom::Precision::kBf16 : loom::Precision::kFp32;
  auto created = loom::GpuGpt::Create(mc, rt, loom::AdamWConfig{});
  if (!created.ok()) return fail("create", created.status());
  std::unique_ptr<loom::GpuGpt> gpt = std::move(*created);
  gpt->set_allow_tf32(use_tf32);
  gpt->set_attention_by_gemm(attention == "gemm");
  if (loom::Status st = gpt->InitParams(1234); !st.ok()) return fail("init", st);

  std::vector<int32_t> tokens(static_cast<size_t>(batch * seq)), targets(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>(loom::Mix64(i) % static_cast<uint64_t>(vocab));
    targets[i] = static_cast<int32_t>(loom::Mix64(i + 7777777) % static_cast<uint64_t>(vocab));
  }
  const float dloss = 1.0f / static_cast<float>(batch * seq);
  std::vector<double> times, losses;
  for (int s = 0; s < warmup + steps; ++s) {
    const auto t0 = Clock::now();
    auto loss = gpt->ForwardBackward(tokens.data(), targets.data(), batch, seq, dloss);
    if (!loss.ok()) return fail("forward/backward", loss.status());
    auto norm = gpt->Step(3e-4);
    if (!norm.ok()) return fail("step", norm.status());
    if (loom::Status st = gpt->Synchronize(); !st.ok()) return fail("synchronize", st);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (s >= warmup) times.push_back(ms);
    losses.push_back(*loss * dloss);
  }
  const double gpu_ms = Median(times);
  const double n = static_cast<double>(batch * seq), c = static_cast<double>(hidden);
  const double matmul_params =
      static_cast<double>(layers) * 12.0 * c * c + static_cast<double>(vocab) * c;
  const double flops = 6.0 * n * matmul_params + 6.0 * static_cast<double>(layers * batch) *
                                                     static_cast<double>(seq * seq) * c;
  const double peak = bf16 ? peak_bf16 : (use_tf32 ? peak_tf32 : peak_fp32);
  const char* peak_name = bf16 ? "bf16 dense" : (use_tf32 ? "TF32 dense" : "fp32 non-tensor");
  const bool torch_tf32 = use_tf32 && !bf16;  // autocast runs attention in bf16 anyway
  const double tokens_per_s = n / (gpu_ms * 1e-3);
  const double mfu = flops / (gpu_ms * 1e-3) / (peak * 1e12);
  std::printf(
      "config layers=%lld hidden=%lld heads=%lld seq=%lld batch=%lld vocab=%lld precision=%s "
      "tf32=%s vocab_chunk=%lld attention=%s; %.1fM parameters (%.1fM in matmuls)\n",
      (long long)layers, (long long)hidden, (long long)heads, (long long)seq, (long long)batch,
      (long long)vocab, precision_name.c_str(), use_tf32 ? "on" : "off", (long long)vocab_chunk,
      gpt->attention_by_gemm() ? "gemm" : "flash", static_cast<double>(gpt->layout().total) / 1e6,
      matmul_params / 1e6);
  std::printf("loom: median %.2f ms/step over %d steps (min %.2f, max %.2f); loss %.4f -> %.4f\n",
              gpu_ms, steps, *std::min_element(times.begin(), times.end()),
              *std::max_element(times.begin(), times.end()), losses.front(), losses.back());
  std::printf("loom: loss per step (warm-up included):");
  for (double l : losses) std::printf(" %.4f", l);
  std::printf("\n");
  std::printf(
      "loom: %.0f tokens/s, %.1f TFLOP/s achieved, MFU %.3f against %.0f TFLOP/s (%s "
      "peak; --peak-*-tflops to change)\n",
      tokens_per_s, flops / (gpu_ms * 1e-3) / 1e12, mfu, peak, peak_name);
  std::printf("memory: %s\n", gpt->MemoryReport().c_str());
  std::printf("memory MiB: params %.1f grads %.1f optimizer %.1f activations %.1f other %.1f\n",
              Mib(gpt->usage(loom::MemTag::kParams).current),
              Mib(gpt->usage(loom::MemTag::kGrads).current),
              Mib(gpt->usage(loom::MemTag::kOptimizer).current),
              Mib(gpt->usage(loom::MemTag::kActivations).current),
              Mib(gpt->usage(loom::MemTag::kOther).current));
  gpt.reset();  // give the GPU's memory back before PyTorch runs

  // The benchmark may run from a copy of the tree elsewhere (a GPU machine's bundle): the script
  // is looked for in the source tree it was built from, then under the working directory.
  if (torch_script.empty()) {
    torch_script =
        FirstExisting({LOOM_SOURCE_DIR "/bench/torch_train_step.py", "bench/torch_train_step.py"});
  }
  const std::string probe = " -c \"import torch; assert torch.cuda.is_available()\"";
  std::string torch_ms = "nan", ratio = "nan", out;
  bool have_torch = false;
  if (!skip_torch) {
    for (const std::string& py : python.empty()
                                     ? std::vector<std::string>{"/usr/bin/python3", "python3"}
                                     : std::vector<std::string>{python}) {
      if (RunCapture(py + probe, &out)) {
        python = py;
        have_torch = true;
        break;
      }
    }
  }
  if (skip_torch) {
    std::printf("torch: skipped (--skip-torch)\n");
  } else if (!have_torch) {
    std::printf("torch: PyTorch with CUDA is unavailable (%s)\n", LastLine(out).c_str());
  } else if (torch_script.empty()) {
    std::printf("torch: bench/torch_train_step.py not found (--torch-script to name it)\n");
  } else {
    char args[512];
    std::snprintf(args, sizeof(args),
                  " --device cuda --layers %lld --hidden %lld --heads %lld --seq %lld --batch "
                  "%lld --vocab %lld --warmup %d --steps %d --grad-clip 1.0%s%s",
                  (long long)layers, (long long)hidden, (long long)heads, (long long)seq,
                  (long long)batch, (long long)vocab, warmup, steps, bf16 ? " --autocast-bf16" : "",
                  torch_tf32 ? " --tf32" : "");
    const std::string cmd = python + " " + torch_script + args;
    const bool ok = RunCapture(cmd, &out);
    const char* at = std::strstr(out.c_str(), "torch_ms=");
    double ms = 0;
    if (ok && at != nullptr && std::sscanf(at, "torch_ms=%lf", &ms) == 1 && ms > 0) {
      std::printf("torch (%s, %s): %s\n", bf16 ? "autocast bf16" : "fp32", python.c_str(),
                  LastLine(out).c_str());
      torch_ms = std::to_string(ms);
      ratio = std::to_string(gpu_ms / ms);
    } else {
      std::printf("torch: the PyTorch run failed (%s)\n", LastLine(out).c_str());
    }
  }
  std::printf("gpu_ms=%.3f tokens_per_s=%.0f mfu=%.4f torch_ms=%s ratio=%s\n", gpu_ms, tokens_per_s,
              mfu, torch_ms.c_str(), ratio.c_str());
  return 0;
}
