// Overlap formulas (see the header for the model).
#include "coordinator/planner/overlap_model.h"

#include <algorithm>

namespace loom {

Exposure Overlap(double window, double compute, double own, const LinkLoad& load, double async,
                 double slowdown) {
  Exposure e;
  // The busiest link must fit its traffic in the window; what does not fit extends it.
  const double link = std::max(0.0, load.Max() - window);
  e.own = std::min(link, std::max(0.0, own - window));
  e.shared = link - e.own;
  // Compute that shares the device with a transfer runs slower for as long as they overlap;
  // when the link already extends the window by more, the slower compute is hidden in it.
  const double slowed = slowdown * std::min(async, compute);
  e.slowdown = std::max(0.0, slowed - link);
  return e;
}

double SerialChainExposed(int n, double each, double window) {
  if (n <= 0 || each <= 0) return 0;
  // Transfer i (1..n) is ready at i * window / n and they run one after another, so the chain
  // ends at max_i (i * window / n + (n - i + 1) * each); the maximum of this affine function of i
  // is at i = n (window + each) or i = 1 (window / n + n * each).
  const double nn = n;
  return std::max(each, nn * each - (nn - 1) / nn * window);
}

}  // namespace loom
