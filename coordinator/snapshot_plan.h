// The in-memory snapshot plan of a launched job (docs/SNAPSHOTS.md): the erasure code — the
// job's `snapshot:` section, else the default for the failure domains its nodes span (racks
// where the manifest names them, else the nodes) — the stripe groups across those domains
// (fault/snapshot/stripe.h, with its placement check), and every rank's node. Pure code.
#pragma once

#include <string>
#include <vector>

#include "coordinator/cluster.h"
#include "core/status.h"
#include "job/job_config.h"
#include "proto/control.pb.h"

namespace loom {

// `rank_node`: the cluster node index of every world rank. `job_key` names the job's shared
// memory. `job_file`: for messages about the snapshot section. An explicit code that the nodes
// cannot hold is an error naming the section; the default falls back to node-local snapshots
// (and says why in `*note`, when given).
Result<proto::SnapshotPlan> PlanSnapshots(const SnapshotConfig& config, const Cluster& cluster,
                                          const std::vector<int>& rank_node,
                                          const std::string& job_key, const std::string& job_file,
                                          std::string* note = nullptr);

// One line: "every step, RS(2,1) over 4 nodes in 2 stripe groups (state + 50% parity in memory)".
std::string DescribeSnapshots(const proto::SnapshotPlan& plan);

}  // namespace loom
