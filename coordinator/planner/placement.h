// Rank -> (node, device) mapping and the link each kind of group crosses.
//
// Ranks fill nodes in order, `ranks_per_node` consecutive ranks per node, so with Megatron's rank
// order (tp fastest, then cp, dp, pp; parallel/layout.h) a tensor-parallel group sits inside one
// node whenever tp divides the ranks per node. Excluded nodes are never used. Nodes are chained
// so that consecutive nodes are the best connected pairs of the measured bandwidth matrix (when
// the manifest has one): data-parallel rings and pipeline hops run between consecutive nodes
// of that chain, so slow pairs end up far apart or unused.
//
// A group of one kind is an arithmetic progression of ranks (stride, size): tensor (1, tp),
// context (tp, cp), data x context (tp, cp*dp), pipeline (tp*cp*dp, pp). Its GroupPath is the
// worst over every group of that shape: the slowest hop of its ring, where an inter-node hop gets
// the node's network bandwidth divided among the groups of the same kind that use it at once.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "coordinator/cluster.h"
#include "coordinator/planner/comm_model.h"
#include "coordinator/planner/hardware.h"
#include "core/status.h"

namespace loom {

struct RankPlacement {
  std::vector<int> nodes;  // cluster node indices in the order ranks fill them
  int ranks_per_node = 1;
  int devices_per_rank = 1;  // CPU cores per rank when cores are shared
  int world = 0;
  int type = 0;  // device type of every used node
  int NodeOf(int rank) const { return nodes[static_cast<size_t>(rank / ranks_per_node)]; }
  int DeviceOf(int rank) const { return (rank % ranks_per_node) * devices_per_rank; }
};

// The nodes planning may use: usable (not excluded) nodes of one device type and device count,
// the largest such pool by devices, chained best-connected first. `note` receives a sentence
// when some usable nodes are left out (other device type or count).
std::vector<int> NodePool(const Cluster& c, std::string* note);

// Places `world` ranks on the first nodes of `pool`. Fails when they do not fit.
Result<RankPlacement> PlaceRanks(const Cluster& c, const std::vector<int>& pool, int world);

// Worst-case paths of group shapes under one placement, memoised (the search asks for the same
// few shapes many times).
class PathCache {
 public:
  PathCache(const Cluster& c, const RankPlacement& p, const Hardware& h) : c_(c), p_(p), h_(h) {}
  // Ring collective over groups of `size` ranks spaced `stride` apart.
  GroupPath Ring(int stride, int size);
  // Point-to-point hops between ranks `stride` apart (pipeline neighbours): every rank of a node
  // sends at once, so an inter-node hop gets 1 / ranks_per_node of the node's bandwidth.
  GroupPath Hop(int stride, int size);

 private:
  GroupPath Compute(int stride, int size, bool p2p) const;
  const Cluster& c_;
  const RankPlacement& p_;
  const Hardware& h_;
  std::map<std::tuple<int, int, bool>, GroupPath> memo_;
};

}  // namespace loom
