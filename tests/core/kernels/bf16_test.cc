// bfloat16 array conversions (as core/half.h rounds: to nearest even, NaN, infinity) and the bf16
// GEMM against a double-precision reference on the same bf16 inputs, for every transpose, leading
// dimensions wider than the matrices, and accumulation (beta 1).
#include "core/kernels/bf16.h"

#include "core/half.h"

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

}  // namespace
}  // namespace loom
