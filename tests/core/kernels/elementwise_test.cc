// GELU (tanh form) and residual kernels; the float GELU uses the vectorised exp and is compared
// with the double reference to float precision.
#include "core/kernels/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/half.h"
#include "core/kernels/fast_math.h"
#include "core/threads.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::Dot;
using testing::RandomVector;

double GeluRef(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(Gelu, ForwardMatchesReference) {
  ConfigureThreads(2);
  auto x = RandomVector<double>(1000, 1, 4.0);
  x.push_back(-100);
  x.push_back(100);
  x.push_back(0);
  std::vector<double> out(x.size());
  GeluForward(out.data(), x.data(), static_cast<int64_t>(x.size()));
  std::vector<float> xf(x.begin(), x.end()), outf(x.size());
  GeluForward(outf.data(), xf.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(out[i], GeluRef(x[i]), 1e-12) << x[i];
    ASSERT_NEAR(outf[i], GeluRef(xf[i]), 2e-6 * std::max(1.0, std::fabs(x[i]))) << x[i];
  }
}

// The bf16 output (the GEMM input under precision: bf16) is the float GELU rounded by
// FloatToBf16, bit for bit, across the kernel's blocks (a length that is not a multiple of them)
// and for infinities and NaN.
TEST(Gelu, Bf16OutputIsTheFloatGeluRounded) {
  ConfigureThreads(2);
  auto xd = RandomVector<double>(5000, 4, 6.0);
  std::vector<float> x(xd.begin(), xd.end());
  x[7] = INFINITY;
  x[1500] = -INFINITY;
  x[4999] = NAN;
  x[2048] = 1e-40f;  // a denormal
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y(x.size());
  std::vector<uint16_t> y16(x.size());
  GeluForward(y.data(), x.data(), n);
  GeluForward(y16.data(), x.data(), n);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y16[i], FloatToBf16(y[i])) << i << " " << x[i];
}

TEST(Gelu, BackwardMatchesFiniteDifferences) {
  ConfigureThreads(2);
  auto x = RandomVector<double>(300, 2, 3.0), r = RandomVector<double>(300, 3);
  std::vector<double> out(x.size()), dx(x.size());
  auto loss = [&] {
    GeluForward(out.data(), x.data(), 300);
    return Dot(out, r);
  };
  GeluBackward(dx.data(), x.data(), r.data(), 300);
  testing::ExpectGradientMatches(x, dx, loss, "dx");
  // float backward agrees with the double one.
  std::vector<float> xf(x.begin(), x.end()), rf(r.begin(), r.end()), dxf(300);
  GeluBackward(dxf.data(), xf.data(), rf.data(), 300);
  for (size_t i = 0; i < 300; ++i)
    ASSERT_NEAR(dxf[i], dx[i], 1e-5 * std::max(1.0, std::fabs(dx[i])));
}

TEST(FastExp, AccurateOverSoftmaxRange) {
  for (float x = -80.f; x <= 80.f; x += 0.013f) {
    const double ref = std::exp(static_cast<double>(x));
    ASSERT_NEAR(FastExp(x) / ref, 1.0, 5e-7) << x;
  }
}

TEST(Residual, ForwardAndBackward) {
  std::vector<float> a{1, 2, 3}, b{10, 20, 30}, out(3), da{1, 1, 1}, db(3, 0.f);
  ResidualForward(out.data(), a.data(), b.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33}));
  std::vector<float> g{0.5f, -1.f, 2.f};
  ResidualBackward(da.data(), db.data(), g.data(), 3);
  EXPECT_EQ(da, (std::vector<float>{1.5f, 0.f, 3.f}));  // accumulates
  EXPECT_EQ(db, g);
}

}  // namespace
}  // namespace loom
