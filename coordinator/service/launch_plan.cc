// Layout choice and job rewriting for loom launch / loom coordinator.
#include "coordinator/service/launch_plan.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "coordinator/plan_job.h"
#include "coordinator/planner/model_math.h"
#include "coordinator/planner/search.h"
#include "coordinator/service/embedded_manifest.h"
#include "core/config_reader.h"
#include "job/job_rewrite.h"
#include "model/config.h"

namespace loom {

Result<Cluster> LocalhostCluster(int ranks) {
  LOOM_ASSIGN_OR_RETURN(ConfigSection root,
                        ConfigSection::LoadString(kLocalhostManifest, "<built-in localhost.yaml>"));
  LOOM_ASSIGN_OR_RETURN(Cluster c, ParseCluster(std::move(root)));
  if (ranks > 0 && !c.nodes.empty()) {
    Node& n = c.nodes[0];
    DeviceType& t = c.types[static_cast<size_t>(n.type)];
    if (ranks > n.devices) {  // more ranks than cores: they share them
      const double share = static_cast<double>(n.devices) / ranks;
      t.peak_fp32 *= share;
      t.peak_bf16 *= share;
      t.memory_bandwidth *= share;
      t.memory *= share;
      t.core_share = share;
    }
    n.devices = ranks;
  }
  return c;
}

namespace {

std::string Format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, args...);
  return buf;
}

}  // namespace

namespace {

// The layout: the job's own when fully fixed (checked against the ranks launched), priced by the
// planner either way; otherwise the planner's best.
Result<Prediction> ChooseLayout(const PlanJob& job, const Cluster& cluster,
                                const Calibration& calibration, int world, LaunchPlan* out,
                                RankPlacement* placement) {
  if (job.FullyFixed()) {
    const int64_t fixed = *job.tp * *job.cp * *job.pp * *job.dp;
    if (fixed != world) {
      return InvalidArgument(job.file +
                             ": section 'parallel': tp*cp*pp*dp = " + std::to_string(fixed) +
                             ", but " + std::to_string(world) + " ranks are launched");
    }
    out->how = "the job's parallel section";
  }
  // The planner prices a fixed layout too (one candidate) and chooses the rest otherwise.
  Result<SearchResult> found = SearchPlans(job, cluster, calibration, 1);
  if (!found.ok()) return found.status().WithContext(job.file);
  if (found->plans.empty()) {
    return FailedPrecondition(job.file + ": no layout of " + std::to_string(world) +
                              " ranks fits in memory on " + cluster.name);
  }
  if (out->how.empty()) {
    out->how = Format("planner: best of %lld layouts for %d ranks (searched in %.2f s)",
                      static_cast<long long>(found->stats.enumerated), world, found->stats.seconds);
  }
  *placement = found->placement;
  return found->plans.front();
}

// Where every rank runs: per used node its host and slot count.
void PlaceRanks(const Cluster& cluster, const RankPlacement& placement, int world,
                LaunchPlan* out) {
  for (int r = 0; r < world; ++r) {
    out->spec.node.push_back(placement.NodeOf(r));
    out->spec.device.push_back(placement.DeviceOf(r));
  }
  SetHosts(cluster, out);
}

}  // namespace

void SetHosts(const Cluster& cluster, LaunchPlan* plan) {
  std::map<int, int> per_node;
  for (int node : plan->spec.node) ++per_node[node];
  plan->hosts.clear();
  plan->slots.clear();
  for (const auto& [node, count] : per_node) {
    const Node& n = cluster.nodes[static_cast<size_t>(node)];
    plan->hosts.push_back(n.host.empty() ? n.name : n.host);
    plan->slots.push_back(count);
  }
  // Ranks of CPU devices on one host split its cores in (node, device) order, so that a logical
  // node's ranks are consecutive shares (core/affinity.h).
  const std::vector<int>& node = plan->spec.node;
  const std::vector<int>& device = plan->spec.device;
  std::map<std::string, std::vector<std::pair<std::pair<int, int>, size_t>>> cpu_ranks_of_host;
  for (size_t r = 0; r < node.size(); ++r) {
    const Node& n = cluster.nodes[static_cast<size_t>(node[r])];
    if (!cluster.types[static_cast<size_t>(n.type)].shared_cores) continue;
    const int dev = r < device.size() ? device[r] : static_cast<int>(r);
    cpu_ranks_of_host[n.host.empty() ? n.name : n.host].push_back({{node[r], dev}, r});
  }
  plan->spec.core_share.assign(node.size(), 0);
  plan->spec.core_shares.assign(node.size(), 0);
  for (auto& [host, ranks] : cpu_ranks_of_host) {
    if (ranks.size() < 2) continue;
    std::sort(ranks.begin(), ranks.end());
    for (size_t i = 0; i < ranks.size(); ++i) {
      plan->spec.core_share[ranks[i].second] = static_cast<int>(i);
      plan->spec.core_shares[ranks[i].second] = static_cast<int>(ranks.size());
    }
  }
}

Result<LaunchPlan> PlanLaunch(const JobConfig& parsed, const JobOverrides& overrides,
                              const Cluster& cluster, const Calibration& calibration, int world) {
  // Workers resolve the job's relative paths against this, wherever they run.
  JobConfig job = parsed;
  std::error_code ec;
  job.path = std::filesystem::absolute(job.path, ec).lexically_normal().string();
  PlanJob plan_job = PlanJobOf(job);
  // Priced in the precision the workers train in (plan.precision is loom plan's what-if).
  plan_job.precision = job.precision;
  if (world <= 0) world = cluster.UsableDevices();
  plan_job.devices = world;
  plan_job.selective_recompute = false;  // the runtime recomputes all of a layer or nothing
  LaunchPlan out;
  RankPlacement placement;
  LOOM_ASSIGN_OR_RETURN(const Prediction best,
                        ChooseLayout(plan_job, cluster, calibration, world, &out, &placement));
  const Candidate& chosen = best.candidate;
  out.prediction =
      Format("predicted %.1f ms/step, %.0f tokens/s, MFU %.1f%%, peak memory %.1f MB, %s",
             best.time.step * 1e3, best.tokens_per_s, 100 * best.mfu, best.peak_memory / 1e6,
             job.precision == Precision::kBf16 ? "bf16 compute with fp32 master weights" : "fp32");
  const Layout& l = chosen.layout;
  // The job as the workers will run it: its own text with the layout and the overrides in.
  JobEdits edits;
  edits.layout = l;
  edits.schedule = ScheduleKindName(chosen.schedule);
  edits.micro_batch = chosen.micro_batch;
  edits.recompute = chosen.recompute == Recompute::kFull ? Recompute::kFull : Recompute::kNone;
  edits.overrides = overrides;
  JobSpec& s = out.spec;
  LOOM_ASSIGN_OR_RETURN(s.job_yaml, RewriteJobText(job, edits));
  s.layout = l;
  s.schedule = l.pp > 1 ? ScheduleKindName(chosen.schedule) : "";
  s.job_path = job.path;
  s.steps = job.steps;
  s.tokens_per_step = plan_job.global_batch * plan_job.seq;
  s.precision = PrecisionName(job.precision);
  s.predicted_step_s = best.time.step;
  s.flops_per_step = ModelFlops(plan_job.model, plan_job.global_batch, plan_job.seq);
  const DeviceType& type = cluster.types[static_cast<size_t>(placement.type)];
  s.peak_flops = type.Peak(plan_job.precision);
  PlaceRanks(cluster, placement, l.world(), &out);
  return out;
}

}  // namespace loom
