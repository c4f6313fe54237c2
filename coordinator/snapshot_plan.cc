// Choosing the snapshot code and stripe groups for a launch.
#include "coordinator/snapshot_plan.h"

#include <map>
#include <set>

#include "fault/snapshot/stripe.h"

namespace loom {

Result<proto::SnapshotPlan> PlanSnapshots(const SnapshotConfig& config, const Cluster& cluster,
                                          const std::vector<int>& rank_node,
                                          const std::string& job_key, const std::string& job_file,
                                          std::string* note) {
  proto::SnapshotPlan plan;
  plan.set_every(static_cast<int32_t>(config.every));
  plan.set_job_key(job_key);
  // The nodes in use, their ranks, their failure domains.
  std::map<int, StripeNode> used;
  for (size_t r = 0; r < rank_node.size(); ++r) {
    const Node& n = cluster.nodes.at(static_cast<size_t>(rank_node[r]));
    plan.add_rank_node(n.name);
    StripeNode& sn = used[rank_node[r]];
    sn.name = n.name;
    sn.domain = n.rack.empty() ? n.name : n.rack;
    sn.ranks.push_back(static_cast<int>(r));
  }
  std::vector<StripeNode> nodes;
  std::set<std::string> domains;
  for (auto& [index, sn] : used) {
    domains.insert(sn.domain);
    nodes.push_back(std::move(sn));
  }
  const bool explicit_code = config.m.has_value();
  ErasureCode code = DefaultErasureCode(static_cast<int>(domains.size()));
  if (explicit_code)
    code = {config.m.value() > 0 ? static_cast<int>(config.k.value_or(1)) : 1,
            static_cast<int>(*config.m)};
  if (code.m > 0) {
    Result<std::vector<StripeGroup>> groups = FormStripeGroups(nodes, code);
    if (!groups.ok()) {
      if (explicit_code) {
        return groups.status().WithContext(job_file + ": section 'snapshot' (" + code.ToString() +
                                           ")");
      }
      if (note != nullptr) {
        *note = "the default " + code.ToString() + " does not fit (" + groups.status().message() +
                "): snapshots stay node-local";
      }
      code = {1, 0};
    } else {
      for (const StripeGroup& g : *groups) {
        proto::StripeGroupSpec* s = plan.add_groups();
        for (int r : g.ranks) s->add_ranks(r);
      }
    }
  }
  plan.set_k(code.m > 0 ? code.k : 1);
  plan.set_m(code.m);
  return plan;
}

std::string DescribeSnapshots(const proto::SnapshotPlan& plan) {
  std::set<std::string> nodes(plan.rank_node().begin(), plan.rank_node().end());
  const std::string every =
      plan.every() == 1 ? "every step" : "every " + std::to_string(plan.every()) + " steps";
  const std::string over = std::to_string(nodes.size()) + " node" + (nodes.size() == 1 ? "" : "s");
  if (plan.m() == 0) {
    return every + ", node-local on " + over +
           " (a crashed worker restarts from its node's "
           "memory; a lost node needs the last checkpoint)";
  }
  const int overhead = 100 * plan.m() / plan.k();
  return every + ", RS(" + std::to_string(plan.k()) + "," + std::to_string(plan.m()) + ") over " +
         over + " in " + std::to_string(plan.groups_size()) + " stripe group" +
         (plan.groups_size() == 1 ? "" : "s") + " (state + " + std::to_string(overhead) +
         "% parity in memory; survives " + std::to_string(plan.m()) + " lost node" +
         (plan.m() == 1 ? "" : "s") + " per group)";
}

}  // namespace loom
