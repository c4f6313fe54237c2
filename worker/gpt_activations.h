// The activations of the GPT (worker/gpt.h) kept between a micro-batch's forward and its backward,
// private to the model's implementation files. Sizes (floats) are in gpt.h's activation plan.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "worker/gpt.h"

namespace loom {

// Llama: ln*_mean unused (RMSNorm), fc is gate|up [N, 2Fl], gelu is silu(gate)*up.
struct Gpt::LayerActs {
  Tensor ln1, ln1_mean, ln1_rstd, qkv, att, lse, res2, ln2, ln2_mean, ln2_rstd, fc, gelu;
};

// Everything one in-flight micro-batch keeps between its forward and its backward.
struct Gpt::Slot {
  std::vector<Tensor> resid;  // num_layers + 1 residual-stream tensors [Nl, C]; 0 is the input
  std::vector<std::unique_ptr<LayerActs>> acts;  // per layer, or one shared when recomputing
  Tensor lnf, lnf_mean, lnf_rstd, ce_lse;
  std::vector<int32_t> tokens, targets;
  int64_t b = 0, t = 0;
};

// out[i, :] += bias + resid[i, :] over rows of width c (bias may be null); worker/gpt.cc.
void AddBiasResidual(float* out, const float* bias, const float* resid, int64_t rows, int64_t c);

}  // namespace loom
