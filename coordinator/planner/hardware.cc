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

// Samples of the same key (`same`) from a calibration merged from repeated runs of loom
// calibrate: one sample each, at the median rate of the runs.
template <typename S, typename Same>
std::vector<S> MedianSamples(const std::vector<S>& in, Same same) {
  std::vector<S> out;
  std::vector<std::vector<double>> rates;
  for (const S& s : in) {
    size_t i = 0;
    while (i < out.size() && !same(out[i], s)) ++i;
    if (i == out.size()) out.push_back(s), rates.emplace_back();
    rates[i].push_back(s.flops);
  }
  for (size_t i = 0; i < out.size(); ++i) out[i].flops = Median(rates[i]);
  return out;
}

// The median bandwidth of the samples taken with `threads` threads; 0 if none.
double MedianBandwidth(const std::vector<MemorySample>& v, int threads) {
  std::vector<double> b;
  for (const MemorySample& m : v) {
    if (m.threads == threads) b.push_back(m.bandwidth);
  }
  return b.empty() ? 0 : Median(b);
}

// The samples taken with `threads` threads if there are any, otherwise all of them, with their
// rates rescaled to `threads`.
template <typename S>
std::vector<S> ForThreads(const std::vector<S>& in, int threads) {
  const bool exact =
      std::any_of(in.begin(), in.end(), [&](const S& s) { return s.threads == threads; });
  std::vector<S> out;
  for (S s : in) {
    if (exact && s.threads != threads) continue;
    s.flops *= static_cast<double>(threads) / s.threads;
    out.push_back(s);
  }
  return out;
}

// The ranks of device type `type` the cluster runs (for `loom launch`: the launch's own).
int WorldRanks(const Cluster& cluster, int type, int devices_per_rank) {
  int devices = 0;
  for (const Node& n : cluster.nodes) {
    if (n.type == type && !n.excluded && !n.spare) devices += n.devices;
  }
  return devices / std::max(1, devices_per_rank);
}

// The median of `value` over the samples `keep` accepts measured with the most ranks not above
// `world` (sync_wait, time_sharing: for `loom launch`, its own rank count); `none` without one.
template <typename S, typename Keep, typename Value>
double MedianOfNearestRanks(const std::vector<S>& samples, int world, Keep keep, Value value,
                            double none) {
  int ranks = 0;
  for (const S& s : samples) {
    if (keep(s) && s.ranks <= world) ranks = std::max(ranks, s.ranks);
  }
  std::vector<double> v;
  for (const S& s : samples) {
    if (keep(s) && s.ranks == ranks) v.push_back(value(s));
  }
  return v.empty() ? none : Median(v);
}

}  // namespace

Hardware MakeHardware(const Cluster& cluster, int type, const Calibration& cal, Precision precision,
                      int devices_per_rank) {
  Hardware h;
  h.type = cluster.types[static_cast<size_t>(type)];
  h.precision = precision;
  h.devices_per_rank = devices_per_rank;
  h.peak = h.type.Peak(precision) * devices_per_rank;
  // Loom's CPU attention runs in fp32 in either precision (docs/GPU.md): its rate is fp32's.
  const bool fp32_attention = h.type.shared_cores;
  h.attention_peak = fp32_attention ? h.type.Peak(Precision::kFp32) * devices_per_rank : h.peak;
  h.memory = h.type.memory * devices_per_rank;
  h.gemm_efficiency = cal.gemm_efficiency;
  h.attention_efficiency = cal.attention_efficiency;
  h.memory_bandwidth =
      (cal.memory_bandwidth > 0 ? cal.memory_bandwidth
                                : h.type.memory_bandwidth * cal.memory_efficiency) *
      devices_per_rank;
  if (const double bw = MedianBandwidth(cal.memory, devices_per_rank); bw > 0) {
    h.memory_bandwidth = bw;
  }
  h.optimizer_bandwidth = MedianBandwidth(cal.optimizer, devices_per_rank);
  h.op_overhead = cal.op_overhead;
  const bool same_precision = !cal.has_precision || cal.precision == precision;
  if (same_precision) {
    // Prefer samples taken with this rank's thread count; otherwise rescale the others.
    h.gemm = MedianSamples(ForThreads(cal.gemm, devices_per_rank),
                           [](const GemmSample& a, const GemmSample& b) {
                             return a.m == b.m && a.n == b.n && a.k == b.k;
                           });
  }
  if (same_precision || fp32_attention) {
    h.attention = MedianSamples(ForThreads(cal.attention, devices_per_rank),
                                [](const AttentionSample& a, const AttentionSample& b) {
                                  return a.seq == b.seq && a.head_dim == b.head_dim;
                                });
  }
  const int world = WorldRanks(cluster, type, devices_per_rank);
  if (h.type.core_share < 1) {
    // Calibrated rates are a core's per rank (loom calibrate runs at most a rank per core);
    // oversubscribed ranks time-share the cores, and lose some of them to the sharing itself.
    h.time_sharing = MedianOfNearestRanks(
        cal.time_sharing, world, [](const TimeSharingSample&) { return true; },
        [](const TimeSharingSample& t) { return t.efficiency; }, 1);
    const double share = h.type.core_share * h.time_sharing;
    for (auto& g : h.gemm) g.flops *= share;
    for (auto& a : h.attention) a.flops *= share;
    if (MedianBandwidth(cal.memory, devices_per_rank) > 0) h.memory_bandwidth *= share;
    h.optimizer_bandwidth *= share;
  }
  for (const CollectiveSample& c : cal.collectives) {
    if (c.op == "all_reduce") h.collectives.Add(CollOp::kAllReduce, c.ranks, c.bytes, c.seconds);
    if (c.op == "all_gather") h.collectives.Add(CollOp::kAllGather, c.ranks, c.bytes, c.seconds);
    if (c.op == "reduce_scatter") {
      h.collectives.Add(CollOp::kReduceScatter, c.ranks, c.bytes, c.seconds);
    }
    if (c.op == "send_recv") h.collectives.Add(CollOp::kSendRecv, c.ranks, c.bytes, c.seconds);
  }
  // The wait per synchronisation: the median of its message sizes and repeats.
  h.sync_wait = MedianOfNearestRanks(
      cal.collectives, world, [](const CollectiveSample& c) { return c.op == "sync_wait"; },
      [](const CollectiveSample& c) { return c.seconds; }, 0);
  h.link_efficiency = cal.link_efficiency;
  h.overlap_slowdown = cal.overlap_slowdown;
  h.zero3_rank_bandwidth = std::max(0.0, cal.zero3_rank_bandwidth);
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
  const double p = attention_peak > 0 ? attention_peak : peak;
  return flops / (p * attention_efficiency) + op_overhead;
}

}  // namespace loom
