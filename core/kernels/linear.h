// Linear layer in nn.Linear layout: weight is [OC, IC], y = x W^T + b.
// Rows are tokens (N = batch * seq). Gradients accumulate (+=) into dweight/dbias so micro-batches
// add up; dinp is overwritten unless `accumulate_dinp`.
#pragma once

#include <cstdint>

#include "core/kernels/bf16.h"
#include "core/status.h"

namespace loom {

// out[N,OC] = inp[N,IC] * weight[OC,IC]^T + bias[OC] (bias may be null).
template <typename T>
void LinearForward(T* out, const T* inp, const T* weight, const T* bias, int64_t n, int64_t ic,
                   int64_t oc);

// dinp[N,IC] (=|+=) dout*W;  dweight[OC,IC] += dout^T*inp;  dbias[OC] += sum_rows(dout).
// Any of dinp, dweight, dbias may be null (not needed).
template <typename T>
void LinearBackward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                    int64_t n, int64_t ic, int64_t oc, bool accumulate_dinp = false);

// bf16 compute (`precision: bf16`): the same layer with inputs and weights in bf16 and the
// products accumulated in fp32 (GemmBf16); outputs, biases and every gradient stay fp32.
// The backward casts dout once into `dout16` (n*oc bf16, scratch) for both of its GEMMs.
// Errors: Unimplemented where the build has no bf16 GEMM (core/kernels/bf16.h).
Status LinearForwardBf16(float* out, const Bf16* inp, const Bf16* weight, const float* bias,
                         int64_t n, int64_t ic, int64_t oc);
Status LinearBackwardBf16(float* dinp, float* dweight, float* dbias, const float* dout,
                          Bf16* dout16, const Bf16* inp, const Bf16* weight, int64_t n, int64_t ic,
                          int64_t oc, bool accumulate_dinp = false);
// The same backward when dout is already in bf16 (dout16) for the GEMMs; `dout` (fp32) is read
// only for dbias and may be null when dbias is.
Status LinearBackwardBf16Cast(float* dinp, float* dweight, float* dbias, const float* dout,
                              const Bf16* dout16, const Bf16* inp, const Bf16* weight, int64_t n,
                              int64_t ic, int64_t oc, bool accumulate_dinp = false);

}  // namespace loom
