// AdamW against the textbook formula (bias correction, decoupled decay) and clipping semantics.
#include "core/kernels/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/threads.h"
#include "tests/test_util.h"

namespace loom {
namespace {

TEST(AdamW, MatchesReferenceOverSeveralSteps) {
  ConfigureThreads(2);
  const int64_t n = 50;
  auto p = testing::RandomVector<double>(n, 1);
  auto ref = p;
  std::vector<double> m(n, 0), v(n, 0), rm(n, 0), rv(n, 0);
  const double lr = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  for (int64_t step = 1; step <= 4; ++step) {
    auto g = testing::RandomVector<double>(n, 10 + step);
    AdamWUpdate(p.data(), g.data(), m.data(), v.data(), n,
                {float(lr), float(b1), float(b2), float(eps), float(wd), step});
    for (int64_t i = 0; i < n; ++i) {
      ref[i] -= lr * wd * ref[i];
      rm[i] = b1 * rm[i] + (1 - b1) * g[i];
      rv[i] = b2 * rv[i] + (1 - b2) * g[i] * g[i];
      const double mhat = rm[i] / (1 - std::pow(b1, step)), vhat = rv[i] / (1 - std::pow(b2, step));
      ref[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
  // AdamWParams holds float hyper-parameters; allow for their rounding.
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(p[i], ref[i], 1e-8) << i;
}

TEST(AdamW, NoDecayWhenWeightDecayIsZero) {
  std::vector<float> p{1.f}, g{0.f}, m{0.f}, v{0.f};
  AdamWUpdate(p.data(), g.data(), m.data(), v.data(), 1, {0.1f, 0.9f, 0.95f, 1e-8f, 0.f, 1});
  EXPECT_EQ(p[0], 1.f);
  AdamWUpdate(p.data(), g.data(), m.data(), v.data(), 1, {0.1f, 0.9f, 0.95f, 1e-8f, 0.5f, 2});
  EXPECT_NEAR(p[0], 0.95f, 1e-7);
}

TEST(Clip, ScaleFollowsClipGradNorm) {
  std::vector<float> g{3.f, 4.f};
  const double norm = std::sqrt(SumSquares(g.data(), 2));
  EXPECT_DOUBLE_EQ(norm, 5.0);
  EXPECT_DOUBLE_EQ(ClipScale(norm, 10.0), 1.0);
  EXPECT_NEAR(ClipScale(norm, 1.0), 1.0 / (5.0 + 1e-6), 1e-15);
  EXPECT_DOUBLE_EQ(ClipScale(norm, 0.0), 1.0);  // disabled
}

}  // namespace
}  // namespace loom
