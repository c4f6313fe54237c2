// Turning a job file and a cluster into what the coordinator hands out: the layout (the job's,
// when its `parallel:` section fixes tp, cp, pp and dp; otherwise the planner's best), the job
// text with that layout written into it, and where every rank runs.
#pragma once

#include <string>
#include <vector>

#include "coordinator/calibration.h"
#include "coordinator/cluster.h"
#include "coordinator/service/job_state.h"
#include "core/status.h"
#include "job/job_config.h"
#include "job/job_overrides.h"

namespace loom {

// The built-in manifest of this machine (deploy/clusters/localhost.yaml, compiled in). With
// `ranks` > 0 the node offers that many ranks; when they are more than its cores, the cores are
// shared and each rank's peak compute and memory bandwidth are scaled down accordingly.
Result<Cluster> LocalhostCluster(int ranks);
// Ranks `loom launch` starts on this machine (and `loom plan` plans there) when not told.
constexpr int kLocalhostRanks = 4;

struct LaunchPlan {
  JobSpec spec;                    // for JobState (token left empty: the caller sets it)
  std::string how;                 // "planner: ..." or "the job's parallel section"
  std::string prediction;          // one line: step time, MFU, memory, precision ("": none)
  std::vector<std::string> hosts;  // per used node: host name
  std::vector<int> slots;          // per used node: ranks on it
};

// Recomputes plan->hosts, plan->slots and the cores' shares (spec.core_share, core_shares: the
// ranks of CPU devices on one host, in node and device order, when they are two or more) from
// plan->spec.node and device (every rank's node of `cluster` and device on it).
void SetHosts(const Cluster& cluster, LaunchPlan* plan);

// `job` as parsed (LoadJobConfig) with the command line's `overrides` (applied to it already);
// `world` 0: every usable device of the cluster. The plan's job text has the chosen layout and the
// overrides written in (job/job_rewrite.h); its job_path is absolute. Errors name the job file and
// field.
Result<LaunchPlan> PlanLaunch(const JobConfig& job, const JobOverrides& overrides,
                              const Cluster& cluster, const Calibration& calibration, int world);

}  // namespace loom
