// Slow ranks: each rank's compute time against the median of its peers' (detector.h).
#include <cstdio>

#include "fault/detector/detector.h"

namespace loom::detect {

std::vector<Verdict> Detector::SlowRanks(const std::vector<RankStep>& step) {
  const int w = c_.world;
  std::vector<double> compute(static_cast<size_t>(w), -1.0);
  std::vector<std::string> cpus(static_cast<size_t>(w));
  int64_t at = 0;
  for (const RankStep& r : step) {
    if (r.rank >= 0 && r.rank < w) {
      compute[r.rank] = static_cast<double>(r.compute_ns);
      cpus[r.rank] = r.cpus;
    }
    at = std::max(at, r.step);
  }
  auto cls = [&](int r) {
    return r < static_cast<int>(c_.peer_class.size()) ? c_.peer_class[r] : 0;
  };
  std::vector<Verdict> out;
  for (int r = 0; r < w; ++r) {
    if (compute[r] < 0) continue;
    // Peers: the ranks doing the same work; of those, the ones pinned to the same CPUs when there
    // are any, since a core that the hypervisor or a neighbour slows slows all of its ranks.
    std::vector<double> others, core_mates;
    for (int q = 0; q < w; ++q) {
      if (q == r || compute[q] < 0 || cls(q) != cls(r)) continue;
      others.push_back(compute[q]);
      if (!cpus[r].empty() && cpus[q] == cpus[r]) core_mates.push_back(compute[q]);
    }
    if (!core_mates.empty()) others.swap(core_mates);
    if (others.empty()) continue;
    const double m = MedianOf(others);
    const double score = m > 0 ? compute[r] / m : 1.0;
    scores_[r] = score;
    slow_run_[r] = score >= c_.slow_rank_score ? slow_run_[r] + 1 : 0;
    if (rank_alarmed_[r] && score < c_.slow_rank_release) rank_alarmed_[r] = false;
    if (slow_run_[r] < c_.persist || rank_alarmed_[r]) continue;
    rank_alarmed_[r] = true;
    Verdict v;
    v.kind = AnomalyKind::kSlowRank;
    v.rank = r;
    v.node = NodeOf(r);
    v.score = score;
    v.step = at;
    char buf[160];
    std::snprintf(buf, sizeof(buf),
                  " is slow: straggler score %.2f (its compute takes %.2fx its peers' median, "
                  "%d steps in a row; the others wait for it)",
                  score, score, slow_run_[r]);
    v.line = RankName(r) + buf;
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace loom::detect
