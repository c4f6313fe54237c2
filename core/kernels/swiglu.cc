// SwiGLU. The float loops vectorise through FastExp (std::exp does not without -ffast-math);
// doubles keep std::exp (fast_math.h).
#include "core/kernels/swiglu.h"

#include <algorithm>
#include <cmath>

#include "core/half.h"
#include "core/kernels/fast_math.h"

namespace loom {

template <typename T>
void SwiGluForward(T* out, const T* inp, int64_t rows, int64_t f) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    const T* g = inp + i * 2 * f;
    const T* u = g + f;
    T* o = out + i * f;
#pragma omp simd
    for (int64_t j = 0; j < f; ++j) o[j] = g[j] / (T(1) + FastExp(-g[j])) * u[j];
  }
}

void SwiGluForward(uint16_t* out, const float* inp, int64_t rows, int64_t f) {
  // In blocks of a row: the float SwiGLU into a buffer on the stack, then its rounding to bf16
  // (as the bf16 GELU, core/kernels/elementwise.cc: one loop of both widths vectorises poorly).
  constexpr int64_t kBlock = 1024;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    const float* g = inp + i * 2 * f;
    const float* u = g + f;
    uint16_t* o = out + i * f;
    for (int64_t j0 = 0; j0 < f; j0 += kBlock) {
      const int64_t m = std::min(kBlock, f - j0);
      float y[kBlock];
#pragma omp simd
      for (int64_t j = 0; j < m; ++j) {
        y[j] = g[j0 + j] / (1.0f + FastExp(-g[j0 + j])) * u[j0 + j];
      }
#pragma omp simd
      for (int64_t j = 0; j < m; ++j) o[j0 + j] = FloatToBf16(y[j]);
    }
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
#pragma omp simd
    for (int64_t j = 0; j < f; ++j) {
      const T s = T(1) / (T(1) + FastExp(-g[j]));
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
