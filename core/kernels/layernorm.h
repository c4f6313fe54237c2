// LayerNorm over the last dimension (C), eps 1e-5 by default, biased variance (as PyTorch).
// Forward stores per-row mean and reciprocal std for the backward. Backward accumulates (+=) into
// dinp, dweight and dbias.
#pragma once

#include <cstdint>

namespace loom {

template <typename T>
void LayerNormForward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                      int64_t n, int64_t c, T eps = T(1e-5));

template <typename T>
void LayerNormBackward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                       const T* mean, const T* rstd, int64_t n, int64_t c);

}  // namespace loom
