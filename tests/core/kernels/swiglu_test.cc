// SwiGLU forward against its formula; backward against finite differences.
#include "core/kernels/swiglu.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/half.h"
#include "core/threads.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::Dot;
using testing::RandomVector;

TEST(SwiGlu, ForwardMatchesFormula) {
  ConfigureThreads(2);
  const int64_t rows = 7, f = 9;
  auto x = RandomVector<double>(rows * 2 * f, 1, 4.0);
  std::vector<double> y(rows * f);
  SwiGluForward(y.data(), x.data(), rows, f);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < f; ++j) {
      const double g = x[i * 2 * f + j], u = x[i * 2 * f + f + j];
      EXPECT_NEAR(y[i * f + j], g / (1 + std::exp(-g)) * u, 1e-12);
    }
  }
}

// Float (vectorised exp) against double, to float precision; the bf16 output is the float one
// rounded by FloatToBf16, bit for bit, across the kernel's blocks of a row (f = 2500: two whole
// blocks and a part).
TEST(SwiGlu, FloatAndBf16FollowDouble) {
  ConfigureThreads(2);
  const int64_t rows = 3, f = 2500;
  auto x = RandomVector<double>(rows * 2 * f, 5, 8.0);
  x[11] = -100;  // exp(100) overflows a float
  x[12] = 100;
  std::vector<double> y(rows * f), dy(rows * f, 0.5), dx(rows * 2 * f);
  SwiGluForward(y.data(), x.data(), rows, f);
  SwiGluBackward(dx.data(), x.data(), dy.data(), rows, f);
  std::vector<float> xf(x.begin(), x.end()), yf(y.size()), dyf(dy.begin(), dy.end()),
      dxf(dx.size());
  std::vector<uint16_t> y16(y.size());
  SwiGluForward(yf.data(), xf.data(), rows, f);
  SwiGluForward(y16.data(), xf.data(), rows, f);
  SwiGluBackward(dxf.data(), xf.data(), dyf.data(), rows, f);
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_NEAR(yf[i], y[i], 2e-6 * std::max(1.0, std::fabs(y[i]))) << i;
    ASSERT_EQ(y16[i], FloatToBf16(yf[i])) << i;
  }
  for (size_t i = 0; i < dx.size(); ++i) {
    ASSERT_NEAR(dxf[i], dx[i], 1e-5 * std::max(1.0, std::fabs(dx[i]))) << i;
  }
}

TEST(SwiGlu, BackwardMatchesFiniteDifferences) {
  ConfigureThreads(2);
  const int64_t rows = 5, f = 6;
  auto x = RandomVector<double>(rows * 2 * f, 2, 3.0), r = RandomVector<double>(rows * f, 3);
  std::vector<double> y(rows * f);
  auto loss = [&] {
    SwiGluForward(y.data(), x.data(), rows, f);
    return Dot(y, r);
  };
  std::vector<double> dx(rows * 2 * f, 7.0);  // overwritten
  SwiGluBackward(dx.data(), x.data(), r.data(), rows, f);
  testing::ExpectGradientMatches(x, dx, loss, "dx");
}

}  // namespace
}  // namespace loom
