// Effective device and link model.
#include "coordinator/planner/hardware.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loom {
namespace {

double LogDistance(double a, double b) {
  return std::fabs(std::log(a / b));
}

}  // namespace

Hardware MakeHardware(const Cluster& cluster, int type, const Calibration& cal, Precision precision,
                      int devices_per_rank) {
  Hardware h;
  h.type = cluster.types[static_cast<size_t>(type)];
  h.precision = precision;
  h.devices_per_rank = devices_per_rank;
  h.peak = h.type.Peak(precision) * devices_per_rank;
  h.memory = h.type.memory * devices_per_rank;
  h.gemm_efficiency = cal.gemm_efficiency;
  h.attention_efficiency = cal.attention_efficiency;
  h.memory_bandwidth =
      (cal.memory_bandwidth > 0 ? cal.memory_bandwidth
                                : h.type.memory_bandwidth * cal.memory_efficiency) *
      devices_per_rank;
  for (const MemorySample& m : cal.memory) {
    if (m.threads == devices_per_rank) h.memory_bandwidth = m.bandwidth;
  }
  h.op_overhead = cal.op_overhead;
  const bool same_precision = !cal.has_precision || cal.precision == precision;
  if (same_precision) {
    // Prefer samples taken with this rank's thread count; otherwise rescale the others.
    for (const GemmSample& s : cal.gemm) {
      if (s.threads == devices_per_rank) h.gemm.push_back(s);
    }
    if (h.gemm.empty()) {
      for (GemmSample s : cal.gemm) {
        s.flops *= static_cast<double>(devices_per_rank) / s.threads;
        h.gemm.push_back(s);
      }
    }
    for (const AttentionSample& s : cal.attention) {
      if (s.threads == devices_per_rank) h.attention.push_back(s);
    }
    if (h.attention.empty()) {
      for (AttentionSample s : cal.attention) {
        s.flops *= static_cast<double>(devices_per_rank) / s.threads;
        h.attention.push_back(s);
      }
    }
  }
  h.link_efficiency = cal.link_efficiency;
  h.overlap_slowdown = cal.overlap_slowdown;
  h.intra.latency = cal.intra.latency >= 0 ? cal.intra.latency : cluster.intra.latency;
  h.intra.bandwidth =
      cal.intra.bandwidth > 0 ? cal.intra.bandwidth : cluster.intra.bandwidth * cal.link_efficiency;
  h.inter.latency = cal.inter.latency >= 0 ? cal.inter.latency : cluster.inter.latency;
  h.inter.bandwidth =
      cal.inter.bandwidth > 0 ? cal.inter.bandwidth : cluster.inter.bandwidth * cal.link_efficiency;
  return h;
}

double Hardware::GemmTime(const GemmShape& g, int element_bytes) const {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return 0;
  const double flops = g.flops();
  if (!gemm.empty()) {
    const GemmSample* best = nullptr;
    double best_d = std::numeric_limits<double>::infinity();
    for (const GemmSample& s : gemm) {
      const double d = LogDistance(g.m, s.m) + LogDistance(g.n, s.n) + LogDistance(g.k, s.k);
      if (d < best_d) best_d = d, best = &s;
    }
    return flops / best->flops + op_overhead;
  }
  const double bytes = element_bytes * (g.m * g.k + g.k * g.n + g.m * g.n) * g.count;
  return std::max(flops / (peak * gemm_efficiency), bytes / memory_bandwidth) + op_overhead;
}

double Hardware::AttentionTime(double flops, double seq, double head_dim) const {
  if (!attention.empty()) {
    const AttentionSample* best = nullptr;
    double best_d = std::numeric_limits<double>::infinity();
    for (const AttentionSample& s : attention) {
      const double d = LogDistance(seq, s.seq) + LogDistance(head_dim, s.head_dim);
      if (d < best_d) best_d = d, best = &s;
    }
    return flops / best->flops + op_overhead;
  }
  return flops / (peak * attention_efficiency) + op_overhead;
}

}  // namespace loom
