// Pipeline step time and in-flight activations from the schedule simulator
// (parallel/pipeline/simulator.h), with two economies that keep the search fast:
//  - costs are normalised (forward = 1) and results memoised, so layouts that differ only in
//    absolute speed share one simulation;
//  - for many micro-batches the step time is extrapolated from two simulations with fewer: once
//    the warm-up is over every schedule advances by the same time per extra group of pp
//    micro-batches (steady state), so step(m) is affine in m. The peak in-flight count saturates
//    at the same point (GPipe, whose peak is m * vpp, is computed directly). Tests check both
//    against full simulations.
#pragma once

#include <map>
#include <tuple>
#include <vector>

#include "core/status.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/simulator.h"

namespace loom {

struct PipelineEstimate {
  double step_time = 0;             // seconds (same unit as the costs)
  std::vector<int> peak_in_flight;  // per pipeline rank, in micro-batch chunks
  int simulations = 0;              // simulator runs this call needed (0: memoised)
};

class PipelineModel {
 public:
  // `forward` / `backward`: one micro-batch through one local chunk; `transfer`: one activation
  // or gradient message between neighbouring stages.
  Result<PipelineEstimate> Estimate(ScheduleKind kind, int pp, int vpp, int micro, double forward,
                                    double backward, double transfer);
  // The exact simulation (no extrapolation, no memo): what tests compare Estimate against.
  static Result<PipelineEstimate> Exact(ScheduleKind kind, int pp, int vpp, int micro,
                                        double forward, double backward, double transfer);
  int64_t simulations() const { return simulations_; }

 private:
  using Key = std::tuple<int, int, int, int, int64_t, int64_t>;
  std::map<Key, PipelineEstimate> memo_;
  int64_t simulations_ = 0;
};

}  // namespace loom
