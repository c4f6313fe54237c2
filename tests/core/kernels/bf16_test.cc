// bfloat16 array conversions (as core/half.h rounds: to nearest even, NaN, infinity) and the bf16
// GEMM against a double-precision reference on the same bf16 inputs, for every transpose, leading
// dimensions wider than the matrices, and accumulation (beta 1).
#include "core/kernels/bf16.h"

#include "core/half.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/linear.h"
#include "tests/test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace loom {
namespace {

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 0.00390625f)), 1.0f);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6 (even).
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(1.0f + 3 * 0.00390625f)), 1.0f + 0.015625f);
  // Just above a tie rounds up.
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(std::nextafter(1.0f + 0.00390625f, 2.0f))), 1.0f + 0.0078125f);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(-2.5f)), -2.5f);
  EXPECT_TRUE(std::isinf(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::infinity()))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits in the low half only must not become infinity.
  const float low_nan = [] {
    uint32_t u = 0x7f800001u;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }();
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(low_nan))));
  // The largest finite float rounds to infinity, as IEEE rounding does.
  EXPECT_TRUE(std::isinf(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::max()))));
}

TEST(Bf16, CastsArrays) {
  std::vector<float> x = {0.1f, -3.75f, 1e-30f, 65504.0f, 0.0f};
  std::vector<Bf16> b(x.size());
  std::vector<float> back(x.size());
  CastToBf16(x.data(), b.data(), static_cast<int64_t>(x.size()));
  CastFromBf16(b.data(), back.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(b[i], FloatToBf16(x[i]));
    EXPECT_NEAR(back[i], x[i], std::fabs(x[i]) / 256) << i;  // 8 bits of mantissa
  }
}

TEST(Bf16, GemmMatchesReference) {
  if (!HaveBf16Gemm()) {
    GTEST_SKIP()
        << "built without oneDNN (libdnnl-dev): "
        << GemmBf16(false, false, 1, 1, 1, nullptr, 1, nullptr, 1, 0, nullptr, 1).message();
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0, 1);
  const int64_t m = 37, n = 45, k = 70, pad = 3;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      for (float beta : {0.0f, 1.0f}) {
        const int64_t a_rows = ta ? k : m, a_cols = (ta ? m : k) + pad;
        const int64_t b_rows = tb ? n : k, b_cols = (tb ? k : n) + pad;
        const int64_t ldc = n + pad;
        std::vector<Bf16> a(static_cast<size_t>(a_rows * a_cols)),
            b(static_cast<size_t>(b_rows * b_cols));
        for (Bf16& x : a) x = FloatToBf16(nd(rng));
        for (Bf16& x : b) x = FloatToBf16(nd(rng));
        std::vector<float> c(static_cast<size_t>(m * ldc));
        for (float& x : c) x = nd(rng);
        const std::vector<float> c0 = c;
        ASSERT_TRUE(
            GemmBf16(ta, tb, m, n, k, a.data(), a_cols, b.data(), b_cols, beta, c.data(), ldc)
                .ok());
        double worst = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double want = beta * c0[static_cast<size_t>(i * ldc + j)];
            for (int64_t p = 0; p < k; ++p) {
              const double av =
                  Bf16ToFloat(a[static_cast<size_t>(ta ? p * a_cols + i : i * a_cols + p)]);
              const double bv =
                  Bf16ToFloat(b[static_cast<size_t>(tb ? j * b_cols + p : p * b_cols + j)]);
              want += av * bv;
            }
            worst = std::max(worst, std::fabs(c[static_cast<size_t>(i * ldc + j)] - want));
          }
          // The padding beyond n is left alone.
          for (int64_t j = n; j < ldc; ++j) {
            EXPECT_EQ(c[static_cast<size_t>(i * ldc + j)], c0[static_cast<size_t>(i * ldc + j)]);
          }
        }
        // Exact bf16 products summed in fp32: the error of 70 fp32 additions of O(1) terms.
        EXPECT_LT(worst, 1e-4) << "ta " << ta << " tb " << tb << " beta " << beta;
      }
    }
  }
  EXPECT_FALSE(GemmBf16(false, false, 2, 2, 2, nullptr, 2, nullptr, 2, 0.5f, nullptr, 2).ok());
}

// The bf16 layers of `precision: bf16` against their fp32 kernels on the same bf16-rounded values:
// the same math in fp32 accumulation, so they agree to fp32 rounding (a wrong transpose, stride or
// accumulation would not).
std::vector<float> Rounded(std::vector<float> v) {
  for (float& x : v) x = Bf16ToFloat(FloatToBf16(x));
  return v;
}
std::vector<Bf16> ToBf16(const std::vector<float>& v) {
  std::vector<Bf16> out(v.size());
  CastToBf16(v.data(), out.data(), static_cast<int64_t>(v.size()));
  return out;
}
double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
  return worst;
}

TEST(Bf16, LinearLayerMatchesFp32OnRoundedInputs) {
  if (!HaveBf16Gemm()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
  const int64_t n = 33, ic = 40, oc = 24;
  const auto x = Rounded(testing::RandomVector<float>(n * ic, 1));
  const auto w = Rounded(testing::RandomVector<float>(oc * ic, 2));
  const auto bias = testing::RandomVector<float>(oc, 3);
  const auto dout = Rounded(testing::RandomVector<float>(n * oc, 4));
  std::vector<float> y32(n * oc), y16(n * oc);
  LinearForward<float>(y32.data(), x.data(), w.data(), bias.data(), n, ic, oc);
  const auto x16 = ToBf16(x), w16 = ToBf16(w);
  ASSERT_TRUE(LinearForwardBf16(y16.data(), x16.data(), w16.data(), bias.data(), n, ic, oc).ok());
  EXPECT_LT(MaxDiff(y32, y16), 1e-5);
  // Backward: dinp overwritten, dweight and dbias accumulated onto what they hold.
  std::vector<float> dx32(n * ic, 7.f), dx16(n * ic, 7.f);
  std::vector<float> dw32(oc * ic, 0.5f), dw16(oc * ic, 0.5f), db32(oc, 1.f), db16(oc, 1.f);
  std::vector<Bf16> scratch(n * oc);
  LinearBackward<float>(dx32.data(), dw32.data(), db32.data(), dout.data(), x.data(), w.data(), n,
                        ic, oc);
  ASSERT_TRUE(LinearBackwardBf16(dx16.data(), dw16.data(), db16.data(), dout.data(), scratch.data(),
                                 x16.data(), w16.data(), n, ic, oc)
                  .ok());
  EXPECT_LT(MaxDiff(dx32, dx16), 1e-5);
  EXPECT_LT(MaxDiff(dw32, dw16), 1e-5);
  EXPECT_LT(MaxDiff(db32, db16), 1e-5);
}

TEST(Bf16, CrossEntropyMatchesFp32OnRoundedInputs) {
  if (!HaveBf16Gemm()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
  // A shard of rows [20, 20 + 50) of a 64-token vocabulary padded to 70, in chunks of 16 (the
  // last partial): targets inside, before and after the shard.
  const int64_t n = 19, c = 24;
  const VocabShard s{n, c, 20, 50, 64, 16};
  const auto x = Rounded(testing::RandomVector<float>(n * c, 5));
  const auto wte = Rounded(testing::RandomVector<float>(s.rows * c, 6, 0.5));
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = static_cast<int32_t>((i * 7) % 64);
  std::vector<float> st32(3 * n), st16(3 * n), chunk(n * s.chunk);
  CrossEntropyStats(st32.data(), st32.data() + n, st32.data() + 2 * n, x.data(), wte.data(),
                    targets.data(), s, chunk.data());
  const auto x16 = ToBf16(x), w16 = ToBf16(wte);
  ASSERT_TRUE(CrossEntropyStatsBf16(st16.data(), st16.data() + n, st16.data() + 2 * n, x16.data(),
                                    w16.data(), targets.data(), s, chunk.data())
                  .ok());
  EXPECT_LT(MaxDiff(st32, st16), 1e-5);
  std::vector<float> lse(n), loss(n), dloss(n, 1.0f / n);
  CrossEntropyFinish(lse.data(), loss.data(), st32.data(), st32.data() + n, st32.data() + 2 * n, n);
  std::vector<float> dx32(n * c, 0.25f), dx16(n * c, 0.25f), dw32(s.rows * c, -1.f),
      dw16(s.rows * c, -1.f);
  std::vector<Bf16> chunk16(n * s.chunk);
  CrossEntropyBackward(dx32.data(), dw32.data(), x.data(), wte.data(), targets.data(), lse.data(),
                       dloss.data(), s, chunk.data());
  ASSERT_TRUE(CrossEntropyBackwardBf16(dx16.data(), dw16.data(), x16.data(), w16.data(),
                                       targets.data(), lse.data(), dloss.data(), s, chunk.data(),
                                       chunk16.data())
                  .ok());
  // dlogits are rounded to bf16 for the GEMMs: relative error 2^-9 of terms of size 1/n.
  EXPECT_LT(MaxDiff(dx32, dx16), 2e-3);
  EXPECT_LT(MaxDiff(dw32, dw16), 2e-3);
  EXPECT_GT(MaxDiff(dx32, std::vector<float>(n * c, 0.25f)), 1e-2);  // it did accumulate
  // Padding rows (beyond vocab_valid) keep their gradient.
  for (int64_t r = 44; r < s.rows; ++r) {
    for (int64_t j = 0; j < c; ++j) ASSERT_EQ(dw16[r * c + j], -1.f);
  }
}

}  // namespace
}  // namespace loom
