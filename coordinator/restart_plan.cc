// Spares for lost nodes, or the survivors to replan on.
#include "coordinator/restart_plan.h"

#include <algorithm>

namespace loom {

Result<RestartPlacement> PlaceRestart(const Cluster& cluster, const std::vector<int>& ranks_on,
                                      const std::vector<int>& lost) {
  RestartPlacement out;
  out.cluster = cluster;
  out.node_map.resize(cluster.nodes.size());
  for (size_t i = 0; i < out.node_map.size(); ++i) out.node_map[i] = static_cast<int>(i);
  std::vector<int> lost_used;
  for (int n : lost) {
    out.cluster.nodes.at(static_cast<size_t>(n)).excluded = true;
    if (n < static_cast<int>(ranks_on.size()) && ranks_on[n] > 0) lost_used.push_back(n);
  }
  if (lost_used.empty()) {
    out.summary = "on the same nodes";
    return out;
  }
  std::string names;
  for (int n : lost_used) names += (names.empty() ? "" : ", ") + cluster.nodes[n].name;
  // A spare per lost node, with room for its ranks.
  std::vector<int> spares = out.cluster.SpareNodes();
  std::vector<int> taken;
  for (int n : lost_used) {
    auto it = std::find_if(spares.begin(), spares.end(), [&](int s) {
      return std::find(taken.begin(), taken.end(), s) == taken.end() &&
             out.cluster.nodes[s].devices >= ranks_on[n];
    });
    if (it == spares.end()) break;
    taken.push_back(*it);
  }
  if (taken.size() == lost_used.size()) {
    out.kind = RestartPlacement::Kind::kSpares;
    std::string subs;
    for (size_t i = 0; i < lost_used.size(); ++i) {
      out.node_map[lost_used[i]] = taken[i];
      out.cluster.nodes[taken[i]].spare = false;
      subs += (subs.empty() ? "" : ", ") + out.cluster.nodes[taken[i]].name + " for " +
              cluster.nodes[lost_used[i]].name;
    }
    out.summary = "node" + std::string(lost_used.size() > 1 ? "s " : " ") + names + " lost: spare" +
                  (lost_used.size() > 1 ? "s " : " ") + subs;
    return out;
  }
  out.kind = RestartPlacement::Kind::kReplan;
  if (out.cluster.UsableNodes().empty()) {
    return FailedPrecondition("node" + std::string(lost_used.size() > 1 ? "s " : " ") + names +
                              " lost and no node is left to run on");
  }
  out.summary = "node" + std::string(lost_used.size() > 1 ? "s " : " ") + names + " lost, " +
                (spares.empty() ? "no spare" : "not enough spares") + ": replanned on " +
                std::to_string(out.cluster.UsableNodes().size()) + " surviving node" +
                (out.cluster.UsableNodes().size() == 1 ? "" : "s");
  return out;
}

}  // namespace loom
