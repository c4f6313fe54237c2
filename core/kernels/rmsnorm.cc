// RMSNorm. As LayerNormBackward, dweight is reduced through per-thread partial sums in a fixed
// order, so results do not depend on scheduling.
#include "core/kernels/rmsnorm.h"

#include <omp.h>

#include <cmath>
#include <vector>

namespace loom {

template <typename T>
void RmsNormForward(T* out, T* rstd, const T* inp, const T* weight, int64_t n, int64_t c, T eps) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T* x = inp + i * c;
    T sumsq = 0;
    for (int64_t j = 0; j < c; ++j) sumsq += x[j] * x[j];
    const T s = T(1) / std::sqrt(sumsq / T(c) + eps);
    T* o = out + i * c;
    for (int64_t j = 0; j < c; ++j) o[j] = x[j] * s * weight[j];
    if (rstd) rstd[i] = s;
  }
}

// y_j = w_j x_j s with s = (mean(x^2) + eps)^-1/2, ds/dx_k = -s^3 x_k / C, so
// dx_k = s (w_k g_k - x_k s^2 mean_j(w_j g_j x_j)) and dw_j = g_j x_j s.
template <typename T>
void RmsNormBackward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight,
                     const T* rstd, int64_t n, int64_t c) {
  const int threads = omp_get_max_threads();
  std::vector<T> partial(static_cast<size_t>(threads) * c, T(0));
#pragma omp parallel num_threads(threads)
  {
    T* pw = partial.data() + static_cast<size_t>(omp_get_thread_num()) * c;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const T* g = dout + i * c;
      const T* x = inp + i * c;
      const T s = rstd[i];
      T dot = 0;
      for (int64_t j = 0; j < c; ++j) {
        dot += weight[j] * g[j] * x[j];
        pw[j] += g[j] * x[j] * s;
      }
      const T k = dot * s * s / T(c);
      T* dx = dinp + i * c;
      for (int64_t j = 0; j < c; ++j) dx[j] += s * (weight[j] * g[j] - x[j] * k);
    }
  }
  for (int t = 0; t < threads; ++t) {
    const T* pw = partial.data() + static_cast<size_t>(t) * c;
    for (int64_t j = 0; j < c; ++j) dweight[j] += pw[j];
  }
}

template void RmsNormForward<float>(float*, float*, const float*, const float*, int64_t, int64_t,
                                    float);
template void RmsNormForward<double>(double*, double*, const double*, const double*, int64_t,
                                     int64_t, double);
template void RmsNormBackward<float>(float*, float*, const float*, const float*, const float*,
                                     const float*, int64_t, int64_t);
template void RmsNormBackward<double>(double*, double*, const double*, const double*, const double*,
                                      const double*, int64_t, int64_t);

}  // namespace loom
