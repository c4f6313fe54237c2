// Placement of ranks on nodes and per-group link characterisation.
#include "coordinator/planner/placement.h"

#include <algorithm>
#include <limits>

namespace loom {

std::vector<int> NodePool(const Cluster& c, std::string* note) {
  // Pools of interchangeable nodes: same device type and count.
  std::map<std::pair<int, int>, std::vector<int>> pools;
  for (int i : c.UsableNodes()) {
    const Node& n = c.nodes[static_cast<size_t>(i)];
    pools[{n.type, n.devices}].push_back(i);
  }
  std::vector<int> best;
  int64_t best_devices = -1;
  for (const auto& [key, nodes] : pools) {
    const int64_t d = static_cast<int64_t>(key.second) * static_cast<int64_t>(nodes.size());
    if (d > best_devices) best_devices = d, best = nodes;
  }
  if (note != nullptr) {
    note->clear();
    if (pools.size() > 1) {
      const Node& n = c.nodes[static_cast<size_t>(best[0])];
      *note = "planning on the " + std::to_string(best.size()) + " nodes of " +
              std::to_string(n.devices) + " x " + c.types[static_cast<size_t>(n.type)].name +
              " (the largest pool of identical nodes); other nodes are left out";
    }
  }
  if (c.measured_bandwidth.empty() || best.size() < 3) return best;
  // Greedy chain: from the first node, always continue to the unvisited node with the fastest
  // link (both directions must be fast: take the slower one); ties keep manifest order.
  std::vector<int> chain{best[0]};
  std::vector<char> used(c.nodes.size(), 0);
  used[static_cast<size_t>(best[0])] = 1;
  while (chain.size() < best.size()) {
    const int from = chain.back();
    int next = -1;
    double next_bw = -1;
    for (int cand : best) {
      if (used[static_cast<size_t>(cand)]) continue;
      const double bw = std::min(c.NodeBandwidth(from, cand), c.NodeBandwidth(cand, from));
      if (bw > next_bw) next_bw = bw, next = cand;
    }
    used[static_cast<size_t>(next)] = 1;
    chain.push_back(next);
  }
  return chain;
}

Result<RankPlacement> PlaceRanks(const Cluster& c, const std::vector<int>& pool, int world) {
  if (pool.empty()) return InvalidArgument("no usable nodes");
  const Node& first = c.nodes[static_cast<size_t>(pool[0])];
  const int per_node = first.devices;
  const int64_t capacity = static_cast<int64_t>(per_node) * static_cast<int64_t>(pool.size());
  if (world < 1 || world > capacity) {
    return InvalidArgument("the plan needs " + std::to_string(world) + " devices; " +
                           std::to_string(capacity) + " are usable");
  }
  RankPlacement p;
  p.world = world;
  p.type = first.type;
  const bool shared = c.types[static_cast<size_t>(first.type)].shared_cores;
  const int used_nodes = (world + per_node - 1) / per_node;
  p.ranks_per_node = (world + used_nodes - 1) / used_nodes;
  if (world % p.ranks_per_node != 0) {
    return InvalidArgument(std::to_string(world) + " ranks cannot fill nodes of " +
                           std::to_string(per_node) + " devices evenly");
  }
  // CPU cores are shared by the ranks of a node (loom train gives each cores / ranks threads);
  // accelerators are not.
  p.devices_per_rank = shared ? per_node / p.ranks_per_node : 1;
  p.nodes.assign(pool.begin(), pool.begin() + used_nodes);
  return p;
}

GroupPath PathCache::Ring(int stride, int size) {
  auto key = std::make_tuple(stride, size, false);
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  return memo_[key] = Compute(stride, size, false);
}

GroupPath PathCache::Hop(int stride, int size) {
  auto key = std::make_tuple(stride, size, true);
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  return memo_[key] = Compute(stride, size, true);
}

GroupPath PathCache::Compute(int stride, int size, bool p2p) const {
  GroupPath worst;
  worst.size = size;
  worst.bandwidth = std::numeric_limits<double>::infinity();
  if (size <= 1) return worst;
  const int rpn = p_.ranks_per_node;
  std::vector<int> per_node;
  for (int base = 0; base < p_.world; ++base) {
    if ((base / stride) % size != 0) continue;  // not the first member of its group
    // Members per node (k): the node's network is shared by rpn / k groups of this shape.
    per_node.clear();
    int k = 1, nodes = 1, prev = -1;
    for (int i = 0; i < size; ++i) {
      const int node = p_.NodeOf(base + i * stride);
      if (i > 0 && node != prev) ++nodes;
      per_node.push_back(node);
      prev = node;
    }
    std::vector<int> sorted = per_node;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0, run = 1; i < sorted.size(); ++i) {
      run = (i > 0 && sorted[i] == sorted[i - 1]) ? run + 1 : 1;
      k = std::max(k, static_cast<int>(run));
    }
    const double share = p2p ? 1.0 / rpn : static_cast<double>(k) / rpn;
    worst.nodes = std::max(worst.nodes, nodes);
    for (int i = 0; i < size; ++i) {
      const int a = per_node[static_cast<size_t>(i)];
      const int b = per_node[static_cast<size_t>((i + 1) % size)];
      double bw, lat;
      if (a == b) {
        bw = h_.intra.bandwidth;
        lat = h_.intra.latency;
      } else {
        const bool measured = !c_.measured_bandwidth.empty() && c_.measured_bandwidth[a][b] > 0;
        bw = (measured ? c_.measured_bandwidth[a][b] : h_.inter.bandwidth) * share;
        lat = (!c_.measured_latency.empty() && c_.measured_latency[a][b] > 0)
                  ? c_.measured_latency[a][b]
                  : h_.inter.latency;
      }
      worst.bandwidth = std::min(worst.bandwidth, bw);
      worst.latency = std::max(worst.latency, lat);
    }
  }
  worst.sync_wait = h_.sync_wait;
  // Inside one node, what the calibration measured for this group size (a hop: for two ranks).
  if (worst.nodes == 1 && h_.collectives.Has(p2p ? 2 : size)) worst.measured = &h_.collectives;
  return worst;
}

}  // namespace loom
