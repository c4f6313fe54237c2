// Layout choice and job rewriting for loom launch / loom coordinator.
#include "coordinator/service/launch_plan.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "coordinator/plan_job.h"
#include "coordinator/planner/model_math.h"
#include "coordinator/planner/search.h"
#include "coordinator/service/embedded_manifest.h"
#include "core/config_reader.h"

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

Result<LaunchPlan> PlanLaunch(const std::string& job_file, const Cluster& cluster,
                              const Calibration& calibration, int world) {
  // Workers resolve the job's relative paths against this, wherever they run.
  std::error_code ec;
  const std::string job_path = std::filesystem::absolute(job_file, ec).lexically_normal().string();
  LOOM_ASSIGN_OR_RETURN(PlanJob job, LoadPlanJob(job_path));
  if (world <= 0) world = cluster.UsableDevices();
  job.devices = world;
  job.selective_recompute = false;  // the runtime recomputes all of a layer or nothing
  LaunchPlan out;
  Candidate chosen;
  if (job.FullyFixed()) {
    chosen.layout.tp = static_cast<int>(*job.tp);
    chosen.layout.cp = static_cast<int>(*job.cp);
    chosen.layout.pp = static_cast<int>(*job.pp);
    chosen.layout.dp = static_cast<int>(*job.dp);
    if (chosen.layout.world() != world) {
      return InvalidArgument(job_path + ": section 'parallel': tp*cp*pp*dp = " +
                             std::to_string(chosen.layout.world()) + ", but " +
                             std::to_string(world) + " ranks are launched");
    }
    out.how = "the job's parallel section";
  }
  // The planner prices a fixed layout too (one candidate) and chooses the rest otherwise.
  Result<SearchResult> found = SearchPlans(job, cluster, calibration, 1);
  if (!found.ok()) return found.status().WithContext(job_path);
  if (found->plans.empty()) {
    return FailedPrecondition(job_path + ": no layout of " + std::to_string(world) +
                              " ranks fits in memory on " + cluster.name);
  }
  const Prediction& best = found->plans.front();
  chosen = best.candidate;
  if (out.how.empty()) {
    out.how = Format("planner: best of %lld layouts for %d ranks (searched in %.2f s)",
                     static_cast<long long>(found->stats.enumerated), world, found->stats.seconds);
  }
  out.prediction =
      Format("predicted %.1f ms/step, %.0f tokens/s, MFU %.1f%%, peak memory %.1f MB",
             best.time.step * 1e3, best.tokens_per_s, 100 * best.mfu, best.peak_memory / 1e6);
  const Layout& l = chosen.layout;
  // The job as the workers will run it: its own text with the layout written in.
  YAML::Node root;
  try {
    root = YAML::LoadFile(job_path);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(job_path + ": " + e.what());
  }
  YAML::Node par = root["parallel"];
  par["tp"] = l.tp;
  par["cp"] = l.cp;
  par["pp"] = l.pp;
  par["vpp"] = l.vpp;
  par["dp"] = l.dp;
  par["zero"] = l.zero;
  par["sp"] = l.sp;
  if (l.pp > 1) par["schedule"] = ScheduleKindName(chosen.schedule);
  root["data"]["micro_batch"] = chosen.micro_batch;
  root["runtime"]["recompute"] =
      std::string(chosen.recompute == RecomputeMode::kFull ? "full" : "none");
  YAML::Emitter emit;
  emit << root;
  JobSpec& s = out.spec;
  s.layout = l;
  s.schedule = l.pp > 1 ? ScheduleKindName(chosen.schedule) : "";
  s.job_yaml = emit.c_str();
  s.job_path = job_path;
  s.steps = root["steps"] ? root["steps"].as<int64_t>(0) : 0;
  s.tokens_per_step = job.global_batch * job.seq;
  s.predicted_step_s = best.time.step;
  s.flops_per_step = ModelFlops(job.model, job.global_batch, job.seq);
  const DeviceType& type = cluster.types[static_cast<size_t>(found->placement.type)];
  s.peak_flops = type.Peak(job.precision);
  std::map<int, int> per_node;
  for (int r = 0; r < l.world(); ++r) {
    const int node = found->placement.NodeOf(r);
    s.node.push_back(node);
    s.device.push_back(found->placement.DeviceOf(r));
    ++per_node[node];
  }
  for (const auto& [node, count] : per_node) {
    const Node& n = cluster.nodes[static_cast<size_t>(node)];
    out.hosts.push_back(n.host.empty() ? n.name : n.host);
    out.slots.push_back(count);
  }
  return out;
}

}  // namespace loom
