// RMSNorm over the last dimension (C), as Llama: out = inp * rstd * weight with
// rstd = 1 / sqrt(mean(inp^2) + eps) (no mean subtraction, no bias). The forward keeps the per-row
// rstd for the backward, which accumulates (+=) into dinp and dweight.
#pragma once

#include <cstdint>

namespace loom {

template <typename T>
void RmsNormForward(T* out, T* rstd, const T* inp, const T* weight, int64_t n, int64_t c, T eps);

template <typename T>
void RmsNormBackward(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight,
                     const T* rstd, int64_t n, int64_t c);

}  // namespace loom
