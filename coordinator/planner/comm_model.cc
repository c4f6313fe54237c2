// Collective cost formulas (alpha-beta model).
#include "coordinator/planner/comm_model.h"

#include <algorithm>
#include <cmath>

namespace loom {

const char* AlgoName(Algo a) {
  return a == Algo::kTree ? "tree" : "ring";
}

double RingAllReduce(const GroupPath& g, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0;
  const double n = g.size;
  return 2 * (n - 1) * g.latency + 2 * (n - 1) / n * bytes / g.bandwidth;
}

double TreeAllReduce(const GroupPath& g, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0;
  return 2 * std::ceil(std::log2(static_cast<double>(g.size))) * g.latency +
         2 * bytes / g.bandwidth;
}

double AllReduce(const GroupPath& g, double bytes, Algo* algo) {
  const double ring = RingAllReduce(g, bytes);
  // NCCL builds trees only across nodes; inside one node the ring is used.
  const double tree = g.nodes > 1 ? TreeAllReduce(g, bytes) : ring;
  if (algo != nullptr) *algo = tree < ring ? Algo::kTree : Algo::kRing;
  return std::min(ring, tree);
}

double ReduceScatter(const GroupPath& g, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0;
  const double n = g.size;
  return (n - 1) * g.latency + (n - 1) / n * bytes / g.bandwidth;
}

double AllGather(const GroupPath& g, double bytes) {
  return ReduceScatter(g, bytes);
}

double PointToPoint(const GroupPath& g, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0;
  return g.latency + bytes / g.bandwidth;
}

}  // namespace loom
