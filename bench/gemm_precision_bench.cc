// bf16 against fp32 GEMMs on this CPU: the first measurement for mixed precision (issue "bf16
// mixed precision"). Debian 12's OpenBLAS 0.3.21 declares cblas_sbgemm but is built without it
// (the symbol is not in libopenblas.so), so bf16 goes through oneDNN 2.6 from Debian
// (libdnnl-dev): its matmul primitive with bf16 inputs and fp32 output, against OpenBLAS's
// cblas_sgemm and oneDNN's own fp32 matmul, on the GEMMs of one training step of the benchmark
// model (bench/train_step_bench: 4 layers, hidden 256, 2,048 tokens, vocab 256): per linear
// layer Y = X W^T, dX = dY W and dW = dY^T X. Also what casting both inputs to bf16 costs (a bf16
// step pays it for weights once per step, for activations unless they are kept in bf16). Side
// by side in one run, best of REPS per GEMM; primitives are created once per shape (as a
// trainer would cache them).
// Usage: gemm_precision_bench [REPS]
// Last line: sgemm_ms=... onednn_f32_ms=... onednn_bf16_ms=... ratio=... cast_ms=...
//            ratio_with_cast=...
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <thread>
#include <vector>

#include "core/blas_kernels.h"

namespace {

using Clock = std::chrono::steady_clock;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

template <typename F>
double BestMs(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return best;
}

// fp32 -> bf16, rounding to nearest even (what a trainer's cast kernel does).
void ToBf16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &in[i], 4);
    out[i] = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
}

struct Gemm {
  const char* name;
  const char* form;
  int64_t m, n, k;
  bool ta, tb;  // A is stored k x m (transposed), B is stored n x k
  int count;    // per step
};

// A oneDNN matmul C[m x n] = op(A) op(B) with inputs of type `t` and fp32 output.
struct Matmul {
  dnnl::matmul prim;
  dnnl::memory a, b, c;

  Matmul(const dnnl::engine& eng, const Gemm& g, dt t, void* a_data, void* b_data, float* c_data) {
    const dnnl::memory::desc ad({g.m, g.k}, t, g.ta ? tag::ba : tag::ab);
    const dnnl::memory::desc bd({g.k, g.n}, t, g.tb ? tag::ba : tag::ab);
    const dnnl::memory::desc cd({g.m, g.n}, dt::f32, tag::ab);
    prim = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(ad, bd, cd), eng));
    a = dnnl::memory(ad, eng, a_data);
    b = dnnl::memory(bd, eng, b_data);
    c = dnnl::memory(cd, eng, c_data);
  }
  void Run(dnnl::stream& s) {
    prim.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    s.wait();
  }
};

}  // namespace

int main(int argc, char** argv) {
  loom::UseBestBlasKernels(argv);  // OpenBLAS's SkylakeX kernels, as the loom binary picks them
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  const int64_t tokens = 2048, c = 256, vocab = 256, layers = 4;
  struct Linear {
    const char* name;
    int64_t in, out;
    int count;
  };
  const Linear linears[] = {{"qkv", c, 3 * c, static_cast<int>(layers)},
                            {"proj", c, c, static_cast<int>(layers)},
                            {"fc", c, 4 * c, static_cast<int>(layers)},
                            {"fc2", 4 * c, c, static_cast<int>(layers)},
                            {"lm_head", c, vocab, 1}};
  std::vector<Gemm> gemms;
  for (const Linear& l : linears) {
    gemms.push_back({l.name, "Y", tokens, l.out, l.in, false, true, l.count});    // X W^T
    gemms.push_back({l.name, "dX", tokens, l.in, l.out, false, false, l.count});  // dY W
    gemms.push_back({l.name, "dW", l.out, l.in, tokens, true, false, l.count});   // dY^T X
  }
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0, 1);
  // OpenBLAS's kernels as it chose them (loom sets OPENBLAS_CORETYPE where it would fall back to
  // Prescott's: core/blas_kernels.h; set it the same way to compare with loom's GEMMs).
  std::printf(
      "gemm_precision_bench: %u hardware threads, OpenBLAS kernels %s, "
      "OPENBLAS_NUM_THREADS=%s, OMP_NUM_THREADS=%s, oneDNN %d.%d, best of %d\n",
      std::thread::hardware_concurrency(), openblas_get_corename(),
      std::getenv("OPENBLAS_NUM_THREADS") ? std::getenv("OPENBLAS_NUM_THREADS") : "(all)",
      std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "(all)",
      dnnl_version()->major, dnnl_version()->minor, reps);
  std::printf("%-8s %-3s %6s %6s %6s %9s %9s %10s %7s %8s\n", "linear", "", "m", "n", "k",
              "sgemm ms", "dnnl f32", "dnnl bf16", "bf16/s", "cast ms");
  double s_total = 0, f_total = 0, b_total = 0, cast_total = 0;
  for (const Gemm& g : gemms) {
    const size_t a_n = static_cast<size_t>(g.m * g.k), b_n = static_cast<size_t>(g.k * g.n);
    std::vector<float> a(a_n), b(b_n), out(static_cast<size_t>(g.m * g.n));
    for (float& x : a) x = nd(rng);
    for (float& x : b) x = nd(rng);
    std::vector<uint16_t> ab(a_n), bb(b_n);
    const double cast = BestMs(reps, [&] {
      ToBf16(a.data(), ab.data(), a_n);
      ToBf16(b.data(), bb.data(), b_n);
    });
    const int lda = static_cast<int>(g.ta ? g.m : g.k), ldb = static_cast<int>(g.tb ? g.k : g.n);
    const double sg = BestMs(reps, [&] {
      cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                  static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), 1.0f,
                  a.data(), lda, b.data(), ldb, 0.0f, out.data(), static_cast<int>(g.n));
    });
    Matmul f32(eng, g, dt::f32, a.data(), b.data(), out.data());
    Matmul bf(eng, g, dt::bf16, ab.data(), bb.data(), out.data());
    const double fg = BestMs(reps, [&] { f32.Run(strm); });
    const double bg = BestMs(reps, [&] { bf.Run(strm); });
    std::printf("%-8s %-3s %6lld %6lld %6lld %9.3f %9.3f %10.3f %7.2f %8.3f\n", g.name, g.form,
                static_cast<long long>(g.m), static_cast<long long>(g.n),
                static_cast<long long>(g.k), sg, fg, bg, bg / sg, cast);
    s_total += sg * g.count;
    f_total += fg * g.count;
    b_total += bg * g.count;
    cast_total += cast * g.count;
  }
  std::printf(
      "one step's GEMMs: OpenBLAS sgemm %.2f ms, oneDNN f32 %.2f ms, oneDNN bf16 %.2f ms (%.2fx "
      "sgemm); casting every input %.2f ms (bf16 + casts: %.2fx)\n",
      s_total, f_total, b_total, b_total / s_total, cast_total, (b_total + cast_total) / s_total);
  std::printf(
      "sgemm_ms=%.2f onednn_f32_ms=%.2f onednn_bf16_ms=%.2f ratio=%.3f cast_ms=%.2f "
      "ratio_with_cast=%.3f\n",
      s_total, f_total, b_total, b_total / s_total, cast_total, (b_total + cast_total) / s_total);
  return 0;
}
