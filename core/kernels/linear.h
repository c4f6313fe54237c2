// Linear layer in nn.Linear layout: weight is [OC, IC], y = x W^T + b.
// Rows are tokens (N = batch * seq). Gradients accumulate (+=) into dweight/dbias so micro-batches
// add up; dinp is overwritten unless `accumulate_dinp`.
#pragma once

#include <cstdint>

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

}  // namespace loom
