// Element-wise kernels: GELU (tanh form, as GPT-2 and F.gelu(approximate='tanh')) and the residual
// add. The residual backward accumulates (+=); GeluBackward overwrites.
#pragma once

#include <cstdint>

namespace loom {

template <typename T>
void GeluForward(T* out, const T* inp, int64_t n);
// The same, rounding the output to bf16 (core/half.h FloatToBf16): the GEMM input that
// `precision: bf16` keeps instead of the fp32 activation.
void GeluForward(uint16_t* out, const float* inp, int64_t n);
// dinp = dout * gelu'(inp) (overwrites; dinp may alias dout)
template <typename T>
void GeluBackward(T* dinp, const T* inp, const T* dout, int64_t n);

// out = a + b (out may alias a or b).
template <typename T>
void ResidualForward(T* out, const T* a, const T* b, int64_t n);
// da += dout; db += dout (either may be null).
template <typename T>
void ResidualBackward(T* da, T* db, const T* dout, int64_t n);

// y += alpha * x
template <typename T>
void Axpy(T* y, const T* x, T alpha, int64_t n);

}  // namespace loom
