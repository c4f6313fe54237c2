// RoPE against the rotate-half formula written out, its inverse, and its backward (the inverse
// rotation is the transpose of the forward one) against finite differences.
#include "core/kernels/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/threads.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::Dot;
using testing::RandomVector;

TEST(Rope, ForwardMatchesFormula) {
  ConfigureThreads(2);
  const int64_t rows = 5, heads = 3, hd = 8, ld = heads * hd + 4;  // 4 untouched columns
  const RopeTable table = RopeTable::Make(32, hd, 500000.0);
  auto x = RandomVector<double>(rows * ld, 1);
  const std::vector<int32_t> pos = {0, 3, 7, 31, 12};
  std::vector<double> y = x;
  RopeApply(y.data(), ld, rows, heads, pos.data(), table, false);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t j = 0; j < hd / 2; ++j) {
        const double a = pos[i] * std::pow(500000.0, -2.0 * j / hd);
        const double* v = x.data() + i * ld + h * hd;
        const double* o = y.data() + i * ld + h * hd;
        EXPECT_NEAR(o[j], v[j] * std::cos(a) - v[j + hd / 2] * std::sin(a), 1e-6);
        EXPECT_NEAR(o[j + hd / 2], v[j + hd / 2] * std::cos(a) + v[j] * std::sin(a), 1e-6);
      }
    }
    for (int64_t k = heads * hd; k < ld; ++k) EXPECT_EQ(y[i * ld + k], x[i * ld + k]);
  }
  // Position 0 is the identity.
  for (int64_t k = 0; k < heads * hd; ++k) EXPECT_EQ(y[k], x[k]);
  // The inverse undoes it (up to the table's float rounding: cos^2 + sin^2 = 1 +- 1e-7).
  RopeApply(y.data(), ld, rows, heads, pos.data(), table, true);
  for (size_t k = 0; k < x.size(); ++k) EXPECT_NEAR(y[k], x[k], 1e-6);
}

TEST(Rope, Llama3FrequencyScaling) {
  // Llama 3.1 8B's figures: head dim 128, theta 500000, factor 8 over an original 8,192 tokens,
  // band factors 1 and 4: wavelengths under 2,048 tokens keep their frequency, those over 8,192
  // are slowed 8 times, and between them the frequency falls continuously.
  const RopeFrequencyScaling s{8, 1, 4, 8192};
  const double two_pi = 2 * std::acos(-1.0);
  double previous = std::numeric_limits<double>::infinity();
  int kept = 0, slowed = 0, blended = 0;
  for (int64_t j = 0; j < 64; ++j) {
    const double f = std::pow(500000.0, -2.0 * j / 128), w = two_pi / f;
    const double g = RopeScaledFrequency(f, s);
    if (w < 2048) {
      EXPECT_EQ(g, f) << j;
      ++kept;
    } else if (w > 8192) {
      EXPECT_DOUBLE_EQ(g, f / 8) << j;
      ++slowed;
    } else {
      EXPECT_LT(g, f) << j;
      EXPECT_GT(g, f / 8) << j;
      ++blended;
    }
    EXPECT_LT(g, previous) << j;  // still a strictly falling sequence of frequencies
    previous = g;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(slowed, 0);
  EXPECT_GT(blended, 0);
  // Continuous at both edges of the band.
  EXPECT_NEAR(RopeScaledFrequency(two_pi / 2048.000001, s), two_pi / 2048, 1e-9);
  EXPECT_NEAR(RopeScaledFrequency(two_pi / 8191.999999, s), two_pi / 8192 / 8, 1e-9);
  // No scaling: the frequency itself; the table rotates by the scaled frequencies.
  EXPECT_EQ(RopeScaledFrequency(0.25, {}), 0.25);
  const RopeTable t = RopeTable::Make(16, 8, 10000.0, {4, 1, 4, 16});
  for (int64_t j = 0; j < 4; ++j) {
    const double g = RopeScaledFrequency(std::pow(10000.0, -2.0 * j / 8), {4, 1, 4, 16});
    EXPECT_NEAR(t.cos[static_cast<size_t>(15 * 4 + j)], std::cos(15 * g), 1e-7);
    EXPECT_NEAR(t.sin[static_cast<size_t>(15 * 4 + j)], std::sin(15 * g), 1e-7);
  }
}

TEST(Rope, BackwardMatchesFiniteDifferences) {
  ConfigureThreads(2);
  const int64_t rows = 4, heads = 2, hd = 6, ld = heads * hd;
  const RopeTable table = RopeTable::Make(16, hd, 10000.0);
  const std::vector<int32_t> pos = {1, 5, 9, 15};
  auto x = RandomVector<double>(rows * ld, 2), r = RandomVector<double>(rows * ld, 3);
  auto loss = [&] {
    std::vector<double> y = x;
    RopeApply(y.data(), ld, rows, heads, pos.data(), table, false);
    return Dot(y, r);
  };
  std::vector<double> dx = r;
  RopeApply(dx.data(), ld, rows, heads, pos.data(), table, true);
  testing::ExpectGradientMatches(x, dx, loss, "dx");
}

}  // namespace
}  // namespace loom
