// ParallelGemm and Gemm against a naive triple loop for every transpose combination.
#include "core/kernels/blas.h"

#include <gtest/gtest.h>

#include "core/threads.h"
#include "tests/test_util.h"

namespace loom {
namespace {

void NaiveGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
               const std::vector<double>& a, const std::vector<double>& b, double beta,
               std::vector<double>& c) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = alpha * s + beta * c[i * n + j];
    }
}

class GemmTest : public ::testing::TestWithParam<std::tuple<bool, bool, int>> {};

TEST_P(GemmTest, MatchesNaive) {
  auto [ta, tb, threads] = GetParam();
  ConfigureThreads(threads);
  for (auto [m, n, k] :
       {std::tuple<int64_t, int64_t, int64_t>{130, 70, 33}, {17, 300, 64}, {300, 290, 80}}) {
    auto a = testing::RandomVector<double>(m * k, 1);
    auto b = testing::RandomVector<double>(k * n, 2);
    auto c = testing::RandomVector<double>(m * n, 3);
    auto expect = c;
    NaiveGemm(ta, tb, m, n, k, 0.5, a, b, 0.25, expect);
    ParallelGemm<double>(ta, tb, m, n, k, 0.5, a.data(), ta ? m : k, b.data(), tb ? k : n, 0.25,
                         c.data(), n);
    for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], expect[i], 1e-10) << i;
    // float path, same problem
    std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), cf(m * n, 0.f);
    std::vector<double> zero(m * n, 0.0);
    NaiveGemm(ta, tb, m, n, k, 1.0, a, b, 0.0, zero);
    ParallelGemm<float>(ta, tb, m, n, k, 1.f, af.data(), ta ? m : k, bf.data(), tb ? k : n, 0.f,
                        cf.data(), n);
    for (size_t i = 0; i < cf.size(); ++i) ASSERT_NEAR(cf[i], zero[i], 1e-3) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(1, 2)));

}  // namespace
}  // namespace loom
