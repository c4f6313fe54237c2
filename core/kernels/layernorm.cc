// LayerNorm. The backward splits rows over threads and reduces dweight/dbias through per-thread
// partial sums, so the result does not depend on scheduling beyond the fixed summation order.
#include "core/kernels/layernorm.h"

#include <omp.h>

#include <cmath>
#include <vector>

namespace loom {

template <typename T>
void LayerNormForward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                      int64_t n, int64_t c, T eps) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T* x = inp + i * c;
    T sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += x[j];
    T m = sum / T(c);
    T var = 0;
    for (int64_t j = 0; j < c; ++j) {
      T d = x[j] - m;
      var += d * d;
    }
    T s = T(1) / std::sqrt(var / T(c) + eps);
    T* o = out + i * c;
    for (int64_t j = 0; j < c; ++j) o[j] = (x[j] - m) * s * weight[j] + bias[j];
    if (mean) mean[i] = m;
    if (rstd) rstd[i] = s;
  }
}

template <typename T>
void LayerNormBackward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                       const T* mean, const T* rstd, int64_t n, int64_t c) {
  const int threads = omp_get_max_threads();
  std::vector<T> partial(static_cast<size_t>(threads) * 2 * c, T(0));
#pragma omp parallel num_threads(threads)
  {
    T* pw = partial.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * c;
    T* pb = pw + c;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const T* g = dout + i * c;
      const T* x = inp + i * c;
      const T m = mean[i], s = rstd[i];
      // dnorm = g * w;  dx = s * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat))
      T dnorm_mean = 0, dnorm_xhat_mean = 0;
      for (int64_t j = 0; j < c; ++j) {
        T xhat = (x[j] - m) * s;
        T dn = g[j] * weight[j];
        dnorm_mean += dn;
        dnorm_xhat_mean += dn * xhat;
        pb[j] += g[j];
        pw[j] += g[j] * xhat;
      }
      dnorm_mean /= T(c);
      dnorm_xhat_mean /= T(c);
      T* dx = dinp + i * c;
      for (int64_t j = 0; j < c; ++j) {
        T xhat = (x[j] - m) * s;
        dx[j] += s * (g[j] * weight[j] - dnorm_mean - xhat * dnorm_xhat_mean);
      }
    }
  }
  for (int t = 0; t < threads; ++t) {
    const T* pw = partial.data() + static_cast<size_t>(t) * 2 * c;
    for (int64_t j = 0; j < c; ++j) {
      if (dweight) dweight[j] += pw[j];
      if (dbias) dbias[j] += pw[c + j];
    }
  }
}

template void LayerNormForward<float>(float*, float*, float*, const float*, const float*,
                                      const float*, int64_t, int64_t, float);
template void LayerNormForward<double>(double*, double*, double*, const double*, const double*,
                                       const double*, int64_t, int64_t, double);
template void LayerNormBackward<float>(float*, float*, float*, const float*, const float*,
                                       const float*, const float*, const float*, int64_t, int64_t);
template void LayerNormBackward<double>(double*, double*, double*, const double*, const double*,
                                        const double*, const double*, const double*, int64_t,
                                        int64_t);

}  // namespace loom
