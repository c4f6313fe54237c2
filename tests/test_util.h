// Shared helpers for unit tests: deterministic random fills and a central finite-difference
// gradient checker (run on the double instantiations of the kernels).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/rng.h"

namespace loom::testing {

template <typename T>
std::vector<T> RandomVector(size_t n, uint64_t seed, double scale = 1.0) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(NormalAt(seed, 17, i) * scale);
  return v;
}

// The float whose IEEE-754 bits are `u` (NaN payloads, signed zeros, subnormals by hand).
inline float FloatFromBits(uint32_t u) {
  float f;
  static_assert(sizeof(f) == sizeof(u));
  __builtin_memcpy(&f, &u, sizeof(f));
  return f;
}

inline std::vector<int32_t> RandomTokens(size_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(Mix64(seed * 1000003 + i) % vocab);
  return v;
}

// Checks analytic[i] against (L(x + h e_i) - L(x - h e_i)) / 2h for every index of x (or a
// strided sample of at most max_checks). `loss` re-evaluates the scalar objective.
inline void ExpectGradientMatches(std::vector<double>& x, const std::vector<double>& analytic,
                                  const std::function<double()>& loss, const char* what,
                                  double tol = 1e-6, size_t max_checks = 200) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const size_t stride = std::max<size_t>(1, x.size() / max_checks);
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); i += stride) {
    const double saved = x[i];
    x[i] = saved + h;
    const double lp = loss();
    x[i] = saved - h;
    const double lm = loss();
    x[i] = saved;
    const double numeric = (lp - lm) / (2 * h);
    EXPECT_NEAR(analytic[i], numeric, tol * std::max(1.0, std::fabs(numeric)))
        << what << " element " << i;
  }
}

// sum(out * w): the scalar objective whose gradient w.r.t. out is w.
inline double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace loom::testing
