// The planner's search: every layout the job and the cluster allow (tp, cp, pp, vpp, dp, ZeRO
// stage, micro-batch, recompute, sequence parallelism, schedule), fixed fields of the job's
// `parallel:` section respected. Pruning keeps it fast:
//  1. divisibility: tp divides the ranks of a node and the heads, pp the layers, cp the sequence
//     (2 cp), dp the global batch, the micro-batch the per-rank batch; interleaving needs the
//     micro-batch count to be a multiple of pp;
//  2. memory: layouts whose worst pipeline stage exceeds device memory minus headroom are
//     rejected before any timing (the worst stage is the first or the last one);
//  3. branch and bound: the rest are sorted by a lower bound of their step time (everything but
//     the pipeline bubble, which costs a simulation); they are simulated in that order and the
//     search stops when the next lower bound exceeds the k-th best step time found.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "coordinator/calibration.h"
#include "coordinator/cluster.h"
#include "coordinator/plan_job.h"
#include "coordinator/planner/hardware.h"
#include "coordinator/planner/placement.h"
#include "coordinator/planner/time_model.h"

namespace loom {

struct SearchStats {
  int64_t enumerated = 0;       // layouts that passed the divisibility rules
  int64_t rejected_memory = 0;  // of those, did not fit
  int64_t evaluated = 0;        // fully priced (pipeline simulated)
  int64_t simulations = 0;      // simulator runs (after memoisation)
  double seconds = 0;           // wall-clock time of the search
};

struct SearchResult {
  std::vector<Prediction> plans;  // best first, at most top_k
  RankPlacement placement;
  Hardware hardware;
  std::string note;  // e.g. nodes left out of the pool
  SearchStats stats;
  // When nothing fits: the layout that came closest.
  std::optional<Prediction> closest_rejected;
};

Result<SearchResult> SearchPlans(const PlanJob& job, const Cluster& cluster,
                                 const Calibration& calibration, int top_k);

}  // namespace loom
