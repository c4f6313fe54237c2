// Where a failed job starts again (DESIGN §5, "Recovery ladder"): on the same nodes when none
// was lost; with a spare node of the manifest in place of each lost one (same layout: every rank
// keeps its coordinates, the lost ranks' state is rebuilt from the survivors); or, without enough
// spares, on the surviving nodes, for which the planner chooses a new layout (any of tp, cp, pp,
// dp may change) and the state is resharded. Pure code.
#pragma once

#include <string>
#include <vector>

#include "coordinator/cluster.h"
#include "core/status.h"

namespace loom {

struct RestartPlacement {
  enum class Kind { kSame, kSpares, kReplan };
  Kind kind = Kind::kSame;
  // The cluster to plan the next incarnation on: lost nodes excluded, spares taken no longer
  // spare.
  Cluster cluster;
  std::vector<int> node_map;  // kSame, kSpares: old node index -> node index now
  std::string summary;        // "node n2 lost: spare n4 takes its 2 ranks"
};

// `ranks_on`: the ranks each node index of `cluster` ran (0: unused); `lost`: node indices found
// lost. FailedPrecondition when no node is left to run on.
Result<RestartPlacement> PlaceRestart(const Cluster& cluster, const std::vector<int>& ranks_on,
                                      const std::vector<int>& lost);

}  // namespace loom
