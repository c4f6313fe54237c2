// Learning-rate schedule: linear warmup to lr over warmup_steps, then cosine decay to min_lr at
// decay_steps, constant min_lr after. Steps are 0-based.
#pragma once

#include <cstdint>

namespace loom {

double ScheduledLr(double lr, double min_lr, int64_t warmup_steps, int64_t decay_steps,
                   int64_t step);

}  // namespace loom
