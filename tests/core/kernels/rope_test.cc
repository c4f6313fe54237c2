// RoPE against the rotate-half formula written out, its inverse, and its backward (the inverse
// rotation is the transpose of the forward one) against finite differences.
#include "core/kernels/rope.h"

#include <gtest/gtest.h>

#include <cmath>

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
