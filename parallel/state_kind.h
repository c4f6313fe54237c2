// The kinds of per-parameter state a rank holds and a checkpoint or snapshot saves: the fp32
// master weights and AdamW's two moments. Named here, below checkpoint/, so the parameter stores
// (parallel/) and the savers (checkpoint/, fault/) agree without depending on each other.
#pragma once

namespace loom {

enum class StateKind { kParam = 0, kExpAvg = 1, kExpAvgSq = 2 };
constexpr int kNumStates = 3;
const char* StateName(StateKind s);  // "param", "exp_avg", "exp_avg_sq"

}  // namespace loom
