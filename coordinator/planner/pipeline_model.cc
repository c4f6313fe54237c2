// Memoised, extrapolated pipeline simulation.
#include "coordinator/planner/pipeline_model.h"

#include <cmath>

namespace loom {
namespace {

// Relative resolution of the memo key: cost ratios closer than this share a simulation.
constexpr double kRatioResolution = 1e-4;

int64_t Quantise(double ratio) {
  return std::llround(std::log1p(ratio) / kRatioResolution);
}

}  // namespace

Result<PipelineEstimate> PipelineModel::Exact(ScheduleKind kind, int pp, int vpp, int micro,
                                              double forward, double backward, double transfer) {
  LOOM_ASSIGN_OR_RETURN(Schedule s, MakeSchedule(kind, pp, vpp, micro));
  PipelineCosts c;
  c.forward = forward;
  c.backward = backward;
  c.backward_input = backward / 2;
  c.backward_weight = backward / 2;
  c.p2p_latency = transfer;
  LOOM_ASSIGN_OR_RETURN(SimResult r, Simulate(s, c));
  PipelineEstimate e;
  e.step_time = r.step_time;
  e.peak_in_flight = r.peak_in_flight;
  e.simulations = 1;
  return e;
}

Result<PipelineEstimate> PipelineModel::Estimate(ScheduleKind kind, int pp, int vpp, int micro,
                                                 double forward, double backward, double transfer) {
  if (forward <= 0) return InvalidArgument("pipeline model: forward cost must be positive");
  const double b = backward / forward, t = transfer / forward;
  const Key key{static_cast<int>(kind), pp, vpp, micro, Quantise(b), Quantise(t)};
  auto it = memo_.find(key);
  if (it != memo_.end()) {
    PipelineEstimate e = it->second;
    e.step_time *= forward;
    e.simulations = 0;
    return e;
  }
  // Two sizes past the warm-up, pp apart (interleaved schedules need multiples of pp).
  const int m1 = 3 * pp, m2 = 4 * pp;
  PipelineEstimate unit;
  if (pp == 1 || micro <= m2) {
    LOOM_ASSIGN_OR_RETURN(unit, Exact(kind, pp, vpp, micro, 1.0, b, t));
    simulations_ += 1;
  } else {
    LOOM_ASSIGN_OR_RETURN(PipelineEstimate a, Exact(kind, pp, vpp, m1, 1.0, b, t));
    LOOM_ASSIGN_OR_RETURN(PipelineEstimate z, Exact(kind, pp, vpp, m2, 1.0, b, t));
    simulations_ += 2;
    unit.step_time = z.step_time + (z.step_time - a.step_time) / pp * (micro - m2);
    unit.peak_in_flight = z.peak_in_flight;
    if (kind == ScheduleKind::kGPipe) {
      for (int& p : unit.peak_in_flight) p = micro * vpp;
    }
    unit.simulations = 2;
  }
  memo_[key] = unit;
  unit.step_time *= forward;
  return unit;
}

}  // namespace loom
