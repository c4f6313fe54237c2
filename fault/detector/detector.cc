// The detector's state and its per-step entry point; the rules are in slow_rank.cc,
// slow_link.cc and hang.cc.
#include "fault/detector/detector.h"

#include <algorithm>

namespace loom::detect {

std::string GroupKey(const std::string& name, const std::vector<int>& members) {
  return GroupKey(name, members.empty() ? -1 : members.front());
}

std::string GroupKey(const std::string& name, int first_member) {
  return name + "@" + std::to_string(first_member);
}

const char* AnomalyKindName(AnomalyKind k) {
  switch (k) {
    case AnomalyKind::kHang:
      return "hang";
    case AnomalyKind::kSlowRank:
      return "slow rank";
    case AnomalyKind::kSlowLink:
      return "slow link";
    case AnomalyKind::kSlowNode:
      return "slow node";
  }
  return "?";
}

Detector::Detector(DetectorConfig config) : c_(std::move(config)) {
  const size_t w = static_cast<size_t>(std::max(0, c_.world));
  scores_.assign(w, 0.0);
  slow_run_.assign(w, 0);
  rank_alarmed_.assign(w, false);
  link_factors_.assign(w * w, 0.0);
  link_run_.assign(w * w, 0);
  link_alarmed_.assign(w * w, false);
}

void Detector::AddGroup(const GroupInfo& g) {
  groups_[GroupKey(g.name, g.members)] = g.members;
}

int Detector::NodeOf(int rank) const {
  return rank >= 0 && rank < static_cast<int>(c_.rank_node.size()) ? c_.rank_node[rank] : 0;
}

std::string Detector::NodeName(int node) const {
  if (node >= 0 && node < static_cast<int>(c_.node_names.size())) return c_.node_names[node];
  return "node " + std::to_string(node);
}

std::string Detector::RankName(int rank) const {
  return "rank " + std::to_string(rank) + " (" + NodeName(NodeOf(rank)) + ")";
}

std::vector<Verdict> Detector::OnStep(const std::vector<RankStep>& step) {
  if (++steps_seen_ <= c_.warmup) return {};
  std::vector<Verdict> out = SlowRanks(step);
  if (steps_seen_ <= c_.warmup + c_.link_warmup) return out;
  std::vector<Verdict> links = SlowLinks(step);
  out.insert(out.end(), links.begin(), links.end());
  return out;
}

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t n = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(n), v.end());
  if (v.size() % 2) return v[n];
  const double hi = v[n];
  return (*std::max_element(v.begin(), v.begin() + static_cast<long>(n)) + hi) / 2;
}

}  // namespace loom::detect
