// AdamW and clipping. The update follows torch.optim.AdamW's order of operations (decay, moments,
// denom = sqrt(v)/sqrt(bc2) + eps, step = lr/bc1) so results agree to rounding.
#include "core/kernels/optimizer.h"

#include <cmath>

namespace loom {

template <typename T>
void AdamWUpdate(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWParams& p) {
  const T lr = p.lr, b1 = p.beta1, b2 = p.beta2, eps = p.eps;
  const T decay = T(1) - lr * T(p.weight_decay);
  const T bc1 = T(1) - T(std::pow(double(p.beta1), double(p.step)));
  const T bc2_sqrt = T(std::sqrt(1.0 - std::pow(double(p.beta2), double(p.step))));
  const T step_size = lr / bc1;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const T g = grad[i];
    T w = param[i] * decay;
    T mi = m[i] * b1 + (T(1) - b1) * g;
    T vi = v[i] * b2 + (T(1) - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    T denom = std::sqrt(vi) / bc2_sqrt + eps;
    param[i] = w - step_size * mi / denom;
  }
}

template <typename T>
double SumSquares(const T* x, int64_t n) {
  double total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
  for (int64_t i = 0; i < n; ++i) total += double(x[i]) * double(x[i]);
  return total;
}

double ClipScale(double global_norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  double coef = max_norm / (global_norm + 1e-6);
  return coef < 1.0 ? coef : 1.0;
}

template <typename T>
void Scale(T* x, T factor, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

template void AdamWUpdate<float>(float*, const float*, float*, float*, int64_t, const AdamWParams&);
template void AdamWUpdate<double>(double*, const double*, double*, double*, int64_t,
                                  const AdamWParams&);
template double SumSquares<float>(const float*, int64_t);
template double SumSquares<double>(const double*, int64_t);
template void Scale<float>(float*, float, int64_t);
template void Scale<double>(double*, double, int64_t);

}  // namespace loom
