// Linear forward against a reference loop; backward against finite differences (double).
#include "core/kernels/linear.h"

#include <gtest/gtest.h>

#include "core/threads.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::Dot;
using testing::RandomVector;

TEST(Linear, ForwardMatchesReference) {
  ConfigureThreads(2);
  const int64_t n = 37, ic = 19, oc = 23;
  auto x = RandomVector<double>(n * ic, 1), w = RandomVector<double>(oc * ic, 2),
       b = RandomVector<double>(oc, 3);
  std::vector<double> out(n * oc);
  LinearForward(out.data(), x.data(), w.data(), b.data(), n, ic, oc);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < oc; ++o) {
      double s = b[o];
      for (int64_t j = 0; j < ic; ++j) s += x[i * ic + j] * w[o * ic + j];
      ASSERT_NEAR(out[i * oc + o], s, 1e-12);
    }
}

TEST(Linear, BackwardMatchesFiniteDifferences) {
  ConfigureThreads(2);
  const int64_t n = 9, ic = 7, oc = 5;
  auto x = RandomVector<double>(n * ic, 4), w = RandomVector<double>(oc * ic, 5),
       b = RandomVector<double>(oc, 6), r = RandomVector<double>(n * oc, 7);
  std::vector<double> out(n * oc);
  auto loss = [&] {
    LinearForward(out.data(), x.data(), w.data(), b.data(), n, ic, oc);
    return Dot(out, r);
  };
  std::vector<double> dx(n * ic, 0.0), dw(oc * ic, 0.0), db(oc, 0.0);
  LinearBackward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), n, ic, oc);
  testing::ExpectGradientMatches(x, dx, loss, "dx");
  testing::ExpectGradientMatches(w, dw, loss, "dweight");
  testing::ExpectGradientMatches(b, db, loss, "dbias");
  // Gradients accumulate: a second backward doubles dweight and dbias.
  LinearBackward<double>(nullptr, dw.data(), db.data(), r.data(), x.data(), w.data(), n, ic, oc);
  std::vector<double> dw1(oc * ic, 0.0), db1(oc, 0.0);
  LinearBackward<double>(nullptr, dw1.data(), db1.data(), r.data(), x.data(), w.data(), n, ic, oc);
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw[i], 2 * dw1[i], 1e-12);
  for (size_t i = 0; i < db.size(); ++i) EXPECT_NEAR(db[i], 2 * db1[i], 1e-12);
}

}  // namespace
}  // namespace loom
