// Rewriting a job file's text with yaml-cpp: parse, set the edited nodes, emit.
#include "job/job_rewrite.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>

namespace loom {
namespace {

void WriteLayout(const JobEdits& e, YAML::Node& root) {
  if (e.layout) {
    const Layout& l = *e.layout;
    YAML::Node par = root["parallel"];
    par["tp"] = l.tp;
    par["cp"] = l.cp;
    par["pp"] = l.pp;
    par["vpp"] = l.vpp;
    par["dp"] = l.dp;
    par["zero"] = l.zero;
    par["sp"] = l.sp;
    if (l.first_stage_layers > 0) par["first_stage_layers"] = l.first_stage_layers;
    if (l.last_stage_layers > 0) par["last_stage_layers"] = l.last_stage_layers;
    if (l.pp > 1 && !e.schedule.empty()) par["schedule"] = e.schedule;
  }
  if (e.micro_batch) root["data"]["micro_batch"] = *e.micro_batch;
  if (e.recompute) root["runtime"]["recompute"] = std::string(RecomputeName(*e.recompute));
}

void WriteOverrides(const JobOverrides& o, const JobConfig& job, YAML::Node& root) {
  auto absolute = [](const std::string& p) { return std::filesystem::absolute(p).string(); };
  if (o.steps > 0) {
    root["steps"] = o.steps;
    // The workers would otherwise take the decay from the new steps.
    root["schedule"]["decay_steps"] = job.schedule.decay_steps;
  }
  if (!o.checkpoint_dir.empty()) root["checkpoint"]["dir"] = absolute(o.checkpoint_dir);
  if (!o.load.empty()) root["checkpoint"]["load"] = absolute(o.load);
  if (!o.init_from.empty()) root["checkpoint"]["init_from"] = absolute(o.init_from);
  if (!o.precision.empty()) root["precision"] = o.precision;
  if (o.no_resume) root["checkpoint"]["resume"] = false;
  if (o.no_load_optimizer) root["checkpoint"]["load_optimizer"] = false;
  if (o.exit_after_minutes > 0) root["checkpoint"]["exit_after_minutes"] = o.exit_after_minutes;
}

}  // namespace

Result<std::string> RewriteJobText(const JobConfig& job, const JobEdits& edits) {
  if (!edits.layout && !edits.micro_batch && !edits.recompute && edits.overrides.empty()) {
    return job.text;
  }
  YAML::Node root;
  try {
    root = YAML::Load(job.text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(job.path + ": " + e.what());
  }
  WriteLayout(edits, root);
  WriteOverrides(edits.overrides, job, root);
  YAML::Emitter emit;
  emit << root;
  return std::string(emit.c_str());
}

}  // namespace loom
