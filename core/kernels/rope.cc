// RoPE.
#include "core/kernels/rope.h"

#include <cmath>
#include <numbers>

namespace loom {

double RopeScaledFrequency(double freq, const RopeFrequencyScaling& s) {
  if (s.factor <= 0) return freq;
  const double wavelength = 2 * std::numbers::pi / freq;
  if (wavelength < s.original_max_seq / s.high_freq_factor) return freq;
  if (wavelength > s.original_max_seq / s.low_freq_factor) return freq / s.factor;
  const double t = (s.original_max_seq / wavelength - s.low_freq_factor) /
                   (s.high_freq_factor - s.low_freq_factor);
  return (1 - t) * freq / s.factor + t * freq;
}

RopeTable RopeTable::Make(int64_t max_seq, int64_t head_dim, double theta,
                          const RopeFrequencyScaling& scaling) {
  RopeTable t;
  t.half = head_dim / 2;
  t.cos.resize(static_cast<size_t>(max_seq * t.half));
  t.sin.resize(t.cos.size());
  for (int64_t p = 0; p < max_seq; ++p) {
    for (int64_t j = 0; j < t.half; ++j) {
      const double freq =
          RopeScaledFrequency(std::pow(theta, -2.0 * static_cast<double>(j) / head_dim), scaling);
      const double a = static_cast<double>(p) * freq;
      t.cos[static_cast<size_t>(p * t.half + j)] = static_cast<float>(std::cos(a));
      t.sin[static_cast<size_t>(p * t.half + j)] = static_cast<float>(std::sin(a));
    }
  }
  return t;
}

template <typename T>
void RopeApply(T* x, int64_t ld, int64_t rows, int64_t heads, const int32_t* pos,
               const RopeTable& table, bool inverse) {
  const int64_t half = table.half, hd = 2 * half;
  const T sign = inverse ? T(-1) : T(1);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    const float* c = table.cos.data() + pos[i] * half;
    const float* s = table.sin.data() + pos[i] * half;
    for (int64_t h = 0; h < heads; ++h) {
      T* v = x + i * ld + h * hd;
      for (int64_t j = 0; j < half; ++j) {
        const T a = v[j], b = v[j + half], cs = T(c[j]), sn = sign * T(s[j]);
        v[j] = a * cs - b * sn;
        v[j + half] = b * cs + a * sn;
      }
    }
  }
}

template void RopeApply<float>(float*, int64_t, int64_t, int64_t, const int32_t*, const RopeTable&,
                               bool);
template void RopeApply<double>(double*, int64_t, int64_t, int64_t, const int32_t*,
                                const RopeTable&, bool);

}  // namespace loom
