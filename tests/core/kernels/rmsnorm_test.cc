// RMSNorm forward against a direct reference; backward against finite differences.
#include "core/kernels/rmsnorm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/threads.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::Dot;
using testing::RandomVector;

TEST(RmsNorm, ForwardMatchesReference) {
  ConfigureThreads(2);
  const int64_t n = 13, c = 24;
  auto x = RandomVector<double>(n * c, 1, 3.0), w = RandomVector<double>(c, 2);
  std::vector<double> out(n * c), rstd(n);
  RmsNormForward(out.data(), rstd.data(), x.data(), w.data(), n, c, 1e-6);
  for (int64_t i = 0; i < n; ++i) {
    double ms = 0;
    for (int64_t j = 0; j < c; ++j) ms += x[i * c + j] * x[i * c + j] / c;
    const double s = 1 / std::sqrt(ms + 1e-6);
    for (int64_t j = 0; j < c; ++j) ASSERT_NEAR(out[i * c + j], x[i * c + j] * s * w[j], 1e-12);
    EXPECT_NEAR(rstd[i], s, 1e-12);
  }
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  ConfigureThreads(2);
  const int64_t n = 6, c = 10;
  auto x = RandomVector<double>(n * c, 4, 2.0), w = RandomVector<double>(c, 5),
       r = RandomVector<double>(n * c, 7);
  std::vector<double> out(n * c), rstd(n);
  auto loss = [&] {
    RmsNormForward(out.data(), rstd.data(), x.data(), w.data(), n, c, 1e-5);
    return Dot(out, r);
  };
  loss();
  std::vector<double> dx(n * c, 0.0), dw(c, 0.0);
  RmsNormBackward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), n, c);
  testing::ExpectGradientMatches(x, dx, loss, "dx");
  testing::ExpectGradientMatches(w, dw, loss, "dweight");
}

TEST(RmsNorm, BackwardAccumulates) {
  ConfigureThreads(2);
  const int64_t n = 3, c = 8;
  auto x = RandomVector<double>(n * c, 8), w = RandomVector<double>(c, 9),
       r = RandomVector<double>(n * c, 10);
  std::vector<double> out(n * c), rstd(n), dx(n * c, 0.0), dw(c, 0.0);
  RmsNormForward(out.data(), rstd.data(), x.data(), w.data(), n, c, 1e-5);
  RmsNormBackward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), n, c);
  std::vector<double> dx2 = dx, dw2 = dw;
  RmsNormBackward(dx2.data(), dw2.data(), r.data(), x.data(), w.data(), rstd.data(), n, c);
  for (int64_t i = 0; i < n * c; ++i) EXPECT_NEAR(dx2[i], 2 * dx[i], 1e-12);
  for (int64_t j = 0; j < c; ++j) EXPECT_NEAR(dw2[j], 2 * dw[j], 1e-12);
}

}  // namespace
}  // namespace loom
