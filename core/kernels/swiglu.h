// SwiGLU, the Llama MLP's activation: out = silu(gate) * up with silu(g) = g * sigmoid(g).
// `inp` rows are [gate | up] (2f wide: the fused gate/up projection's output, each TP rank's own
// columns of both), `out` rows are f wide.
#pragma once

#include <cstdint>

namespace loom {

template <typename T>
void SwiGluForward(T* out, const T* inp, int64_t rows, int64_t f);
// The same, rounding the output to bf16 (core/half.h FloatToBf16): the GEMM input that
// `precision: bf16` keeps.
void SwiGluForward(uint16_t* out, const float* inp, int64_t rows, int64_t f);
// dinp [rows, 2f] = d(gate) | d(up) of dout [rows, f] (overwrites).
template <typename T>
void SwiGluBackward(T* dinp, const T* inp, const T* dout, int64_t rows, int64_t f);

}  // namespace loom
