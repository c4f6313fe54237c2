// Collective cost formulas (alpha-beta model).
#include "coordinator/planner/comm_model.h"

#include <algorithm>
#include <cmath>

namespace loom {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void MeasuredCollectives::Add(CollOp op, int ranks, double bytes, double seconds) {
  if (ranks < 2 || bytes <= 0 || seconds <= 0) return;
  std::vector<Sample>& v = samples_[{static_cast<int>(op), ranks}];
  auto it = std::lower_bound(v.begin(), v.end(), bytes,
                             [](const Sample& s, double b) { return s.bytes < b; });
  if (it == v.end() || it->bytes != bytes) it = v.insert(it, Sample{bytes, 0, {}});
  it->all.push_back(seconds);
  it->seconds = Median(it->all);
}

double MeasuredCollectives::Time(CollOp op, int ranks, double bytes) const {
  auto found = samples_.find({static_cast<int>(op), ranks});
  if (found == samples_.end()) return -1;
  const std::vector<Sample>& v = found->second;
  if (bytes <= v.front().bytes) return v.front().seconds;
  if (bytes >= v.back().bytes) return v.back().seconds * bytes / v.back().bytes;
  auto hi = std::lower_bound(v.begin(), v.end(), bytes,
                             [](const Sample& s, double b) { return s.bytes < b; });
  auto lo = hi - 1;
  const double f = (bytes - lo->bytes) / (hi->bytes - lo->bytes);
  return lo->seconds + f * (hi->seconds - lo->seconds);
}

bool MeasuredCollectives::Has(int ranks) const {
  for (const auto& [key, v] : samples_) {
    if (key.second == ranks) return true;
  }
  return false;
}

const char* AlgoName(Algo a) {
  return a == Algo::kTree ? "tree" : "ring";
}

namespace {

// The measured time of `op` on `g`, or a negative number.
double Measured(const GroupPath& g, CollOp op, double bytes) {
  return g.measured != nullptr ? g.measured->Time(op, g.size, bytes) : -1;
}

}  // namespace

double RingAllReduce(const GroupPath& g, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0;
  const double n = g.size;
  const double t = Measured(g, CollOp::kAllReduce, bytes);
  return (t >= 0 ? t : 2 * (n - 1) * g.latency + 2 * (n - 1) / n * bytes / g.bandwidth) +
         g.sync_wait;
}

double TreeAllReduce(const GroupPath& g, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0;
  return 2 * std::ceil(std::log2(static_cast<double>(g.size))) * g.latency +
         2 * bytes / g.bandwidth + g.sync_wait;
}

double AllReduce(const GroupPath& g, double bytes, Algo* algo) {
  const double ring = RingAllReduce(g, bytes);
  // NCCL builds trees only across nodes; inside one node the ring is used.
  const double tree = g.nodes > 1 ? TreeAllReduce(g, bytes) : ring;
  if (algo != nullptr) *algo = tree < ring ? Algo::kTree : Algo::kRing;
  return std::min(ring, tree);
}

namespace {

double RingPass(const GroupPath& g, double bytes) {
  const double n = g.size;
  return (n - 1) * g.latency + (n - 1) / n * bytes / g.bandwidth;
}

}  // namespace

double ReduceScatter(const GroupPath& g, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0;
  const double t = Measured(g, CollOp::kReduceScatter, bytes);
  return (t >= 0 ? t : RingPass(g, bytes)) + g.sync_wait;
}

double AllGather(const GroupPath& g, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0;
  const double t = Measured(g, CollOp::kAllGather, bytes);
  return (t >= 0 ? t : RingPass(g, bytes)) + g.sync_wait;
}

double PointToPoint(const GroupPath& g, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0;
  // A hop is between two neighbours whatever the group's size.
  const double t = g.measured != nullptr ? g.measured->Time(CollOp::kSendRecv, 2, bytes) : -1;
  return (t >= 0 ? t : g.latency + bytes / g.bandwidth) + g.sync_wait;
}

}  // namespace loom
