// LayerNorm and the token + position embedding on the GPU agree with the CPU kernels: partial
// blocks (rows not a multiple of the warps per block, channels not a multiple of 32), the bf16
// output, accumulation (+=) of the backward into existing gradients, vocabulary shards and
// explicit or implicit positions.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/cuda/kernels.h"
#include "core/half.h"
#include "core/kernels/embedding.h"
#include "core/kernels/layernorm.h"
#include "tests/core/cuda_test_util.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::DeviceBuffer;
using testing::ExpectAllClose;

struct LnCase {
  int64_t n, c;
};
constexpr LnCase kLnCases[] = {{37, 100}, {8, 768}, {1, 3}, {300, 64}};

// Inputs with a large common offset, so a one-pass variance (E[x^2] - E[x]^2) would fail.
std::vector<float> LnInput(int64_t n, int64_t c, uint64_t seed) {
  auto x = testing::RandomVector<float>(n * c, seed, 2.0);
  for (auto& v : x) v += 10.0f;
  return x;
}

std::vector<double> ToDouble(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// The reference is the CPU kernel's double instantiation: its fp32 instantiation sums a row
// sequentially and carries rounding errors of the size of the tolerance itself (c * eps relative
// in the worst case), while the GPU's warp-strided sums are closer to exact.
TEST(CudaLayer, LayerNormForwardMatchesCpu) {
  LOOM_REQUIRE_GPU();
  for (const auto [n, c] : kLnCases) {
    const std::string what = "n=" + std::to_string(n) + " c=" + std::to_string(c);
    const auto x = LnInput(n, c, 20 + n);
    const auto w = testing::RandomVector<float>(c, 21), b = testing::RandomVector<float>(c, 22);
    std::vector<double> out(n * c), mean(n), rstd(n);
    const auto xd = ToDouble(x), wd = ToDouble(w), bd = ToDouble(b);
    LayerNormForward(out.data(), mean.data(), rstd.data(), xd.data(), wd.data(), bd.data(), n, c);
    LOOM_ASSERT_OK_AND_ASSIGN(auto dx, DeviceBuffer<float>::From(x));
    LOOM_ASSERT_OK_AND_ASSIGN(auto dw, DeviceBuffer<float>::From(w));
    LOOM_ASSERT_OK_AND_ASSIGN(auto db, DeviceBuffer<float>::From(b));
    LOOM_ASSERT_OK_AND_ASSIGN(auto dout, DeviceBuffer<float>::Poisoned(n * c));
    LOOM_ASSERT_OK_AND_ASSIGN(auto dmean, DeviceBuffer<float>::Poisoned(n));
    LOOM_ASSERT_OK_AND_ASSIGN(auto drstd, DeviceBuffer<float>::Poisoned(n));
    LOOM_ASSERT_OK(cuda::LayerNormForward(dout.get(), dmean.get(), drstd.get(), dx.get(), dw.get(),
                                          db.get(), n, c));
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_out, dout.Download());
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_mean, dmean.Download());
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_rstd, drstd.Download());
    ExpectAllClose(g_out, out, 1e-5, 1e-5, "LayerNorm out " + what);
    ExpectAllClose(g_mean, mean, 1e-6, 1e-6, "LayerNorm mean " + what);
    ExpectAllClose(g_rstd, rstd, 1e-5, 1e-6, "LayerNorm rstd " + what);

    // bf16 output: the CPU output rounded, give or take one bf16 ulp (the fp32 values may sit on
    // either side of a rounding boundary); mean and rstd as above.
    LOOM_ASSERT_OK_AND_ASSIGN(auto dout16, DeviceBuffer<uint16_t>::Poisoned(n * c));
    LOOM_ASSERT_OK(cuda::LayerNormForwardBf16(dout16.get(), dmean.get(), nullptr, dx.get(),
                                              dw.get(), db.get(), n, c));
    LOOM_ASSERT_OK_AND_ASSIGN(auto g16, dout16.Download());
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_mean16, dmean.Download());
    int64_t exact = 0;
    for (int64_t i = 0; i < n * c; ++i) {
      const uint16_t want = FloatToBf16(static_cast<float>(out[i]));
      ASSERT_LE(std::abs(int(g16[i]) - int(want)), 1) << what << " element " << i;
      exact += g16[i] == want;
    }
    EXPECT_GE(exact, n * c * 95 / 100) << what;
    ExpectAllClose(g_mean16, mean, 1e-6, 1e-6, "LayerNormBf16 mean " + what);
  }
}

TEST(CudaLayer, LayerNormBackwardAccumulatesLikeCpu) {
  LOOM_REQUIRE_GPU();
  for (const auto [n, c] : kLnCases) {
    const std::string what = "n=" + std::to_string(n) + " c=" + std::to_string(c);
    const auto x = LnInput(n, c, 30 + n);
    const auto w = testing::RandomVector<float>(c, 31), b = testing::RandomVector<float>(c, 32);
    const auto g = testing::RandomVector<float>(n * c, 33);
    // The GPU forward's statistics feed both backwards (the kernel under test is the backward).
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_x, DeviceBuffer<float>::From(x));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_w, DeviceBuffer<float>::From(w));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_b, DeviceBuffer<float>::From(b));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_out, DeviceBuffer<float>::Poisoned(n * c));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_mean, DeviceBuffer<float>::Poisoned(n));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_rstd, DeviceBuffer<float>::Poisoned(n));
    LOOM_ASSERT_OK(cuda::LayerNormForward(d_out.get(), d_mean.get(), d_rstd.get(), d_x.get(),
                                          d_w.get(), d_b.get(), n, c));
    LOOM_ASSERT_OK_AND_ASSIGN(auto mean_f, d_mean.Download());
    LOOM_ASSERT_OK_AND_ASSIGN(auto rstd_f, d_rstd.Download());
    const auto mean = ToDouble(mean_f), rstd = ToDouble(rstd_f);
    const auto xd = ToDouble(x), wd = ToDouble(w), gd = ToDouble(g);
    // Gradients already hold something: the backward must add to it.
    const auto dinp0 = testing::RandomVector<float>(n * c, 34);
    const auto dw0 = testing::RandomVector<float>(c, 35), db0 = testing::RandomVector<float>(c, 36);
    auto dinp = ToDouble(dinp0), dw = ToDouble(dw0), dbias = ToDouble(db0);
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_dinp, DeviceBuffer<float>::From(dinp0));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_dw, DeviceBuffer<float>::From(dw0));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_db, DeviceBuffer<float>::From(db0));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_g, DeviceBuffer<float>::From(g));
    LayerNormBackward(dinp.data(), dw.data(), dbias.data(), gd.data(), xd.data(), wd.data(),
                      mean.data(), rstd.data(), n, c);
    LOOM_ASSERT_OK(cuda::LayerNormBackward(d_dinp.get(), d_dw.get(), d_db.get(), d_g.get(),
                                           d_x.get(), d_w.get(), d_mean.get(), d_rstd.get(), n, c));
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_dinp, d_dinp.Download());
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_dw, d_dw.Download());
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_db, d_db.Download());
    ExpectAllClose(g_dinp, dinp, 1e-5, 2e-5, "LayerNorm dinp " + what);
    ExpectAllClose(g_dw, dw, 1e-5, 2e-5, "LayerNorm dweight " + what);
    ExpectAllClose(g_db, dbias, 1e-5, 2e-5, "LayerNorm dbias " + what);

    // Without dweight/dbias only dinp moves (by the same amount again).
    LayerNormBackward<double>(dinp.data(), nullptr, nullptr, gd.data(), xd.data(), wd.data(),
                              mean.data(), rstd.data(), n, c);
    LOOM_ASSERT_OK(cuda::LayerNormBackward(d_dinp.get(), nullptr, nullptr, d_g.get(), d_x.get(),
                                           d_w.get(), d_mean.get(), d_rstd.get(), n, c));
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_dinp2, d_dinp.Download());
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_dw2, d_dw.Download());
    ExpectAllClose(g_dinp2, dinp, 1e-5, 4e-5, "LayerNorm dinp (second pass) " + what);
    EXPECT_EQ(g_dw2, g_dw) << "dweight changed although null was passed for it";
  }
}

struct EmbCase {
  bool explicit_positions;
  bool with_wpe;
  int64_t vocab_begin, vocab_rows;
};

// Forward is one addition per element: bit-identical. Backward adds repeated tokens in another
// order (atomics): fp32 rounding of short sums.
TEST(CudaLayer, EmbeddingMatchesCpu) {
  LOOM_REQUIRE_GPU();
  const int64_t batch = 3, seq = 11, c = 70, vocab = 50;
  const int64_t n = batch * seq;
  for (const EmbCase ec : {EmbCase{false, true, 0, vocab}, EmbCase{true, true, 10, 20},
                           EmbCase{false, false, 30, 20}, EmbCase{true, false, 0, vocab}}) {
    const std::string what =
        std::string("positions ") + (ec.explicit_positions ? "given" : "implicit") +
        (ec.with_wpe ? ", wpe" : ", no wpe") + ", shard [" + std::to_string(ec.vocab_begin) +
        ", +" + std::to_string(ec.vocab_rows) + ")";
    EmbeddingShape s;
    s.n = n;
    s.seq = seq;
    s.channels = c;
    s.vocab_begin = ec.vocab_begin;
    s.vocab_rows = ec.vocab_rows;
    const auto tokens = testing::RandomTokens(n, vocab, 40);  // 33 tokens of 50: repeats
    std::vector<int32_t> positions(n);
    for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>((i * 7) % seq);
    const int32_t* pos_host = ec.explicit_positions ? positions.data() : nullptr;
    const auto wte = testing::RandomVector<float>(ec.vocab_rows * c, 41);
    const auto wpe = testing::RandomVector<float>(seq * c, 42);
    std::vector<float> out(n * c);
    EmbeddingForward(out.data(), tokens.data(), pos_host, wte.data(),
                     ec.with_wpe ? wpe.data() : nullptr, s);

    LOOM_ASSERT_OK_AND_ASSIGN(auto d_tok, DeviceBuffer<int32_t>::From(tokens));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_pos, DeviceBuffer<int32_t>::From(positions));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_wte, DeviceBuffer<float>::From(wte));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_wpe, DeviceBuffer<float>::From(wpe));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_out, DeviceBuffer<float>::Poisoned(n * c));
    const int32_t* pos_dev = ec.explicit_positions ? d_pos.get() : nullptr;
    LOOM_ASSERT_OK(cuda::EmbeddingForward(d_out.get(), d_tok.get(), pos_dev, d_wte.get(),
                                          ec.with_wpe ? d_wpe.get() : nullptr, s));
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_out, d_out.Download());
    ExpectAllClose(g_out, out, 0.0, 0.0, "EmbeddingForward " + what);

    const auto dout = testing::RandomVector<float>(n * c, 43);
    auto dwte = testing::RandomVector<float>(ec.vocab_rows * c, 44);
    auto dwpe = testing::RandomVector<float>(seq * c, 45);
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_dout, DeviceBuffer<float>::From(dout));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_dwte, DeviceBuffer<float>::From(dwte));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_dwpe, DeviceBuffer<float>::From(dwpe));
    EmbeddingBackward(dwte.data(), ec.with_wpe ? dwpe.data() : nullptr, dout.data(), tokens.data(),
                      pos_host, s);
    LOOM_ASSERT_OK(cuda::EmbeddingBackward(d_dwte.get(), ec.with_wpe ? d_dwpe.get() : nullptr,
                                           d_dout.get(), d_tok.get(), pos_dev, s));
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_dwte, d_dwte.Download());
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_dwpe, d_dwpe.Download());
    ExpectAllClose(g_dwte, dwte, 1e-5, 1e-5, "EmbeddingBackward dwte " + what);
    ExpectAllClose(g_dwpe, dwpe, 1e-5, 1e-5, "EmbeddingBackward dwpe " + what);
  }
}

}  // namespace
}  // namespace loom
