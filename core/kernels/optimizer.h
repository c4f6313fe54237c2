// AdamW (bias-corrected, decoupled weight decay, PyTorch's formulation) and global-norm gradient
// clipping (torch.nn.utils.clip_grad_norm_ semantics: scale = max_norm / (norm + 1e-6) when < 1).
#pragma once

#include <cstdint>

namespace loom {

struct AdamWParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // applied to this tensor (0 for biases and norms)
  int64_t step = 1;           // 1-based count of updates including this one
};

// Updates n parameters in place from their gradients; m and v are the first and second moments.
template <typename T>
void AdamWUpdate(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWParams& p);

// Sum of squares of n values, accumulated in double (partial sums can be added across shards).
template <typename T>
double SumSquares(const T* x, int64_t n);

// The factor clip_grad_norm_ would scale gradients by (1 if no clipping is needed).
double ClipScale(double global_norm, double max_norm);

template <typename T>
void Scale(T* x, T factor, int64_t n);

}  // namespace loom
