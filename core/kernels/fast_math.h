// Vectorisable exp for float (Cody-Waite range reduction + degree-6 polynomial, ~1 ulp on the
// range used by softmax and tanh). std::exp does not vectorise without -ffast-math; this one does,
// which makes attention softmax and GELU several times faster. Doubles use std::exp (the double
// instantiations exist for finite-difference tests, not for speed).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace loom {

inline float FastExp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // Round to nearest by adding and subtracting 1.5 * 2^23 (vectorises, unlike std::floor here).
  const float shifter = 12582912.0f;
  float n = (x * 1.44269504088896341f + shifter) - shifter;
  float r = x - n * 0.693359375f;  // ln2 split in two parts (Cody-Waite)
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

inline double FastExp(double x) {
  return std::exp(x);
}

// tanh through exp: 1 - 2 / (exp(2x) + 1). Saturates correctly at +-1.
template <typename T>
inline T FastTanh(T x) {
  return T(1) - T(2) / (FastExp(T(2) * x) + T(1));
}
template <>
inline double FastTanh<double>(double x) {
  return std::tanh(x);
}

}  // namespace loom
