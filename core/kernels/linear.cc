// Linear forward/backward: three GEMMs and a column sum.
#include "core/kernels/linear.h"

#include <algorithm>

#include "core/kernels/blas.h"

namespace loom {

template <typename T>
void LinearForward(T* out, const T* inp, const T* weight, const T* bias, int64_t n, int64_t ic,
                   int64_t oc) {
  T beta = T(0);
  if (bias != nullptr) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) std::copy(bias, bias + oc, out + i * oc);
    beta = T(1);
  }
  ParallelGemm<T>(false, true, n, oc, ic, T(1), inp, ic, weight, ic, beta, out, oc);
}

template <typename T>
void LinearBackward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                    int64_t n, int64_t ic, int64_t oc, bool accumulate_dinp) {
  if (dinp != nullptr) {
    ParallelGemm<T>(false, false, n, ic, oc, T(1), dout, oc, weight, ic,
                    accumulate_dinp ? T(1) : T(0), dinp, ic);
  }
  if (dweight != nullptr) {
    ParallelGemm<T>(true, false, oc, ic, n, T(1), dout, oc, inp, ic, T(1), dweight, ic);
  }
  if (dbias != nullptr) {
    // Each thread owns a range of output channels: no races, vectorised over channels.
    constexpr int64_t kCols = 64;
#pragma omp parallel for schedule(static)
    for (int64_t c0 = 0; c0 < oc; c0 += kCols) {
      int64_t c1 = std::min(oc, c0 + kCols);
      T acc[kCols] = {};
      for (int64_t i = 0; i < n; ++i) {
        const T* row = dout + i * oc;
        for (int64_t c = c0; c < c1; ++c) acc[c - c0] += row[c];
      }
      for (int64_t c = c0; c < c1; ++c) dbias[c] += acc[c - c0];
    }
  }
}

template void LinearForward<float>(float*, const float*, const float*, const float*, int64_t,
                                   int64_t, int64_t);
template void LinearForward<double>(double*, const double*, const double*, const double*, int64_t,
                                    int64_t, int64_t);
template void LinearBackward<float>(float*, float*, float*, const float*, const float*,
                                    const float*, int64_t, int64_t, int64_t, bool);
template void LinearBackward<double>(double*, double*, double*, const double*, const double*,
                                     const double*, int64_t, int64_t, int64_t, bool);

}  // namespace loom
