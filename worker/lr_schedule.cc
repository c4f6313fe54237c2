#include "worker/lr_schedule.h"

#include <cmath>

namespace loom {

double ScheduledLr(double lr, double min_lr, int64_t warmup_steps, int64_t decay_steps,
                   int64_t step) {
  if (step < warmup_steps)
    return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (step >= decay_steps) return min_lr;
  const double ratio =
      static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps - warmup_steps);
  return min_lr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (lr - min_lr);
}

}  // namespace loom
