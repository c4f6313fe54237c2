// LayerNorm forward against a reference; backward against finite differences.
#include "core/kernels/layernorm.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/threads.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::Dot;
using testing::RandomVector;

TEST(LayerNorm, ForwardMatchesReference) {
  ConfigureThreads(2);
  const int64_t n = 13, c = 24;
  auto x = RandomVector<double>(n * c, 1, 3.0), w = RandomVector<double>(c, 2),
       b = RandomVector<double>(c, 3);
  std::vector<double> out(n * c), mean(n), rstd(n);
  LayerNormForward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c);
  for (int64_t i = 0; i < n; ++i) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < c; ++j) m += x[i * c + j] / c;
    for (int64_t j = 0; j < c; ++j) v += (x[i * c + j] - m) * (x[i * c + j] - m) / c;
    for (int64_t j = 0; j < c; ++j) {
      double expect = (x[i * c + j] - m) / std::sqrt(v + 1e-5) * w[j] + b[j];
      ASSERT_NEAR(out[i * c + j], expect, 1e-12);
    }
    EXPECT_NEAR(mean[i], m, 1e-12);
  }
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  ConfigureThreads(2);
  const int64_t n = 6, c = 10;
  auto x = RandomVector<double>(n * c, 4, 2.0), w = RandomVector<double>(c, 5),
       b = RandomVector<double>(c, 6), r = RandomVector<double>(n * c, 7);
  std::vector<double> out(n * c), mean(n), rstd(n);
  auto loss = [&] {
    LayerNormForward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c);
    return Dot(out, r);
  };
  loss();
  std::vector<double> dx(n * c, 0.0), dw(c, 0.0), db(c, 0.0);
  LayerNormBackward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), mean.data(),
                    rstd.data(), n, c);
  testing::ExpectGradientMatches(x, dx, loss, "dx");
  testing::ExpectGradientMatches(w, dw, loss, "dweight");
  testing::ExpectGradientMatches(b, db, loss, "dbias");
}

}  // namespace
}  // namespace loom
