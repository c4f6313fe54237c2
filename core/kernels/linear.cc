// Linear forward/backward: three GEMMs and a column sum.
#include "core/kernels/linear.h"

#include <algorithm>

#include "core/kernels/blas.h"

namespace loom {
namespace {

// dbias[OC] += sum over the rows of dout[N,OC].
template <typename T>
void SumRows(T* dbias, const T* dout, int64_t n, int64_t oc) {
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

template <typename T>
void CopyBiasRows(T* out, const T* bias, int64_t n, int64_t oc) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) std::copy(bias, bias + oc, out + i * oc);
}

}  // namespace

template <typename T>
void LinearForward(T* out, const T* inp, const T* weight, const T* bias, int64_t n, int64_t ic,
                   int64_t oc) {
  T beta = T(0);
  if (bias != nullptr) {
    CopyBiasRows(out, bias, n, oc);
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
  if (dbias != nullptr) SumRows(dbias, dout, n, oc);
}

Status LinearForwardBf16(float* out, const Bf16* inp, const Bf16* weight, const float* bias,
                         int64_t n, int64_t ic, int64_t oc) {
  if (bias != nullptr) CopyBiasRows(out, bias, n, oc);
  return GemmBf16(false, true, n, oc, ic, inp, ic, weight, ic, bias != nullptr ? 1.0f : 0.0f, out,
                  oc);
}

Status LinearBackwardBf16Cast(float* dinp, float* dweight, float* dbias, const float* dout,
                              const Bf16* dout16, const Bf16* inp, const Bf16* weight, int64_t n,
                              int64_t ic, int64_t oc, bool accumulate_dinp) {
  if (dinp != nullptr) {
    LOOM_RETURN_IF_ERROR(GemmBf16(false, false, n, ic, oc, dout16, oc, weight, ic,
                                  accumulate_dinp ? 1.0f : 0.0f, dinp, ic));
  }
  if (dweight != nullptr) {
    LOOM_RETURN_IF_ERROR(GemmBf16(true, false, oc, ic, n, dout16, oc, inp, ic, 1.0f, dweight, ic));
  }
  if (dbias != nullptr) SumRows(dbias, dout, n, oc);
  return Status::Ok();
}

Status LinearBackwardBf16(float* dinp, float* dweight, float* dbias, const float* dout,
                          Bf16* dout16, const Bf16* inp, const Bf16* weight, int64_t n, int64_t ic,
                          int64_t oc, bool accumulate_dinp) {
  if (dinp != nullptr || dweight != nullptr) CastToBf16(dout, dout16, n * oc);
  return LinearBackwardBf16Cast(dinp, dweight, dbias, dout, dout16, inp, weight, n, ic, oc,
                                accumulate_dinp);
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
