// Element-wise reductions of communication buffers on the host, for backends that reduce there:
// the local backend (comm/local/) and the MPI backend's bf16/f16 operations, which MPI has no
// type for. bf16 and f16 elements are combined in float and rounded back to nearest-even after
// every step, as a device reduces them.
#pragma once

#include <cstdint>

#include "comm/communicator.h"
#include "core/tensor.h"

namespace loom {

// dst[i] = op(dst[i], src[i]) for n elements of `dtype` (one CommSupports accepts).
void ReduceInto(void* dst, const void* src, int64_t n, DType dtype, ReduceOp op);

}  // namespace loom
