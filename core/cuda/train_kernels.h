// Kernels of the training step that have no CPU twin in core/kernels/ (the CPU model does these
// in loops of its own): the bias of a linear layer and its gradient, filling and scaling vectors.
// Same contracts as kernels.h: device pointers, host shapes, queued on `stream` (nullptr: the
// legacy default stream) without waiting; "overwrites" and "accumulates (+=)" stated per function.
// Needs no CUDA header.
#pragma once

#include <cstdint>

#include "core/cuda/stream.h"
#include "core/status.h"

namespace loom::cuda {

// out[i, j] += bias[j] + resid[i, j] over rows i < n and columns j < c (`resid` may be null:
// out[i, j] += bias[j]). The order of the additions is the CPU model's (bias + resid first).
Status AddBiasResidual(float* out, const float* bias, const float* resid, int64_t n, int64_t c,
                       Stream stream = nullptr);

// dbias[j] += sum over rows i < n of dout[i, j] (row-major [n, c]). Deterministic: each column is
// summed by one block in a fixed order (no atomics), so repeated runs agree bit for bit.
Status BiasBackward(float* dbias, const float* dout, int64_t n, int64_t c, Stream stream = nullptr);

// x[i] = value for i < n (overwrites).
Status Fill(float* x, float value, int64_t n, Stream stream = nullptr);

// x[i] *= factor for i < n (in place; gradient clipping).
Status Scale(float* x, float factor, int64_t n, Stream stream = nullptr);

}  // namespace loom::cuda
