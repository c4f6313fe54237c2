// SwiGLU forward against its formula; backward against finite differences.
#include "core/kernels/swiglu.h"

#include <gtest/gtest.h>

#include <cmath>

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
