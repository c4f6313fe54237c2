// CUDA twins of the element-wise CPU kernels and device discovery. Built only when the CUDA
// toolkit is found (LOOM_CUDA=AUTO|ON); nothing in the CPU build includes this header.
// All functions return a Status instead of aborting; launches are checked.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace loom::cuda {

// Number of usable GPUs; 0 (not an error) when the driver or devices are absent.
int DeviceCount();

// Device-memory versions of core/kernels/elementwise.h and optimizer.h (float). Pointers are
// device pointers; the calls are synchronous on the default stream.
Status GeluForward(float* out, const float* inp, int64_t n);
Status GeluBackward(float* dinp, const float* inp, const float* dout, int64_t n);
Status AdamWUpdate(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                   float beta1, float beta2, float eps, float weight_decay, int64_t step);

// Round trip through device memory: host in -> GELU on the GPU -> host out (used by tests).
Status GeluForwardHost(float* out, const float* inp, int64_t n);

}  // namespace loom::cuda
