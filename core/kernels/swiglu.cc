// SwiGLU.
#include "core/kernels/swiglu.h"

#include <cmath>

#include "core/half.h"

namespace loom {

template <typename T>
void SwiGluForward(T* out, const T* inp, int64_t rows, int64_t f) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    const T* g = inp + i * 2 * f;
    const T* u = g + f;
    T* o = out + i * f;
    for (int64_t j = 0; j < f; ++j) o[j] = g[j] / (T(1) + std::exp(-g[j])) * u[j];
  }
}

void SwiGluForward(uint16_t* out, const float* inp, int64_t rows, int64_t f) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    const float* g = inp + i * 2 * f;
    const float* u = g + f;
    uint16_t* o = out + i * f;
    for (int64_t j = 0; j < f; ++j) o[j] = FloatToBf16(g[j] / (1.0f + std::exp(-g[j])) * u[j]);
  }
}

// d(up) = dout * silu(g); d(gate) = dout * up * silu'(g), silu'(g) = s (1 + g (1 - s)).
template <typename T>
void SwiGluBackward(T* dinp, const T* inp, const T* dout, int64_t rows, int64_t f) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    const T* g = inp + i * 2 * f;
    const T* u = g + f;
    const T* d = dout + i * f;
    T* dg = dinp + i * 2 * f;
    T* du = dg + f;
    for (int64_t j = 0; j < f; ++j) {
      const T s = T(1) / (T(1) + std::exp(-g[j]));
      du[j] = d[j] * g[j] * s;
      dg[j] = d[j] * u[j] * s * (T(1) + g[j] * (T(1) - s));
    }
  }
}

template void SwiGluForward<float>(float*, const float*, int64_t, int64_t);
template void SwiGluForward<double>(double*, const double*, int64_t, int64_t);
template void SwiGluBackward<float>(float*, const float*, const float*, int64_t, int64_t);
template void SwiGluBackward<double>(double*, const double*, const double*, int64_t, int64_t);

}  // namespace loom
