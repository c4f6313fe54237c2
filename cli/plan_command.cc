// `loom plan`: search the layouts of a job on a cluster and print the best ones.
//   loom plan --cluster deploy/clusters/dgx-a100.yaml --job examples/plan/gpt-145b.yaml
//             --calibration deploy/clusters/dgx-a100.calibration.json --top 5 --explain
// With every field of the job's `parallel:` section given (tp, cp, pp, dp), the search has one
// layout left and the output is the predicted step time of exactly that layout. Without
// --cluster it plans on this machine's built-in manifest with --np ranks (default 4), as
// `loom launch` does: `loom plan --job examples/demo.yaml --np 4 --calibration <its cache>`.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "cli/validators.h"
#include "coordinator/calibration.h"
#include "coordinator/cluster.h"
#include "coordinator/plan_job.h"
#include "coordinator/planner/report.h"
#include "coordinator/planner/search.h"
#include "coordinator/service/launch_plan.h"

namespace loom {
namespace {

struct PlanOptions {
  std::string cluster, job, calibration;
  std::string precision;     // --precision ("": the job's plan.precision, else its precision)
  int np = kLocalhostRanks;  // ranks on the built-in localhost manifest (no --cluster)
  int top = 5;
  bool explain = false, json = false;
};

Status RunPlan(const PlanOptions& o) {
  LOOM_ASSIGN_OR_RETURN(Cluster cluster,
                        o.cluster.empty() ? LocalhostCluster(o.np) : LoadCluster(o.cluster));
  LOOM_ASSIGN_OR_RETURN(PlanJob job, LoadPlanJob(o.job));
  if (!o.precision.empty()) {  // CLI11 checked the name
    LOOM_ASSIGN_OR_RETURN(job.precision, ParsePrecision(o.precision));
  }
  Calibration cal;
  if (!o.calibration.empty()) {
    LOOM_ASSIGN_OR_RETURN(cal, LoadCalibration(o.calibration));
  }
  LOOM_ASSIGN_OR_RETURN(SearchResult result, SearchPlans(job, cluster, cal, o.top));
  const std::string note = CalibrationPrecisionNote(cal, job.precision);
  if (o.json) {
    // The note is for people: on stderr, the JSON alone on stdout.
    if (!note.empty())
      std::fprintf(stderr, "loom plan: %s: %s\n", o.calibration.c_str(), note.c_str());
    std::fputs(PlanJson(result, job, cluster).c_str(), stdout);
    return Status::Ok();
  }
  std::printf("calibration: %s\n",
              o.calibration.empty()
                  ? "defaults (no --calibration; see loom calibrate)"
                  : (o.calibration + (cal.source.empty() ? "" : " — " + cal.source)).c_str());
  if (!note.empty()) std::printf("calibration: %s\n", note.c_str());
  std::fputs(PlanTable(result, job, cluster).c_str(), stdout);
  if (o.explain) std::fputs(PlanExplain(result, job, cluster).c_str(), stdout);
  return Status::Ok();
}

}  // namespace

void AddPlanCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "Search parallel layouts for a job on a cluster");
  CLI::Option* cluster =
      cmd->add_option("--cluster", o->cluster,
                      "Cluster manifest (docs/MANIFESTS.md; default: this machine, as loom launch "
                      "plans it, with --np ranks)");
  cmd->add_option("--np", o->np,
                  "Ranks on this machine without --cluster (default 4, as loom launch; more "
                  "than its cores share them)")
      ->check(CLI::Range(1, 1 << 20))
      ->excludes(cluster);
  cmd->add_option("--job", o->job, "Job file (docs/JOB.md; plan: section in docs/PLANNER.md)")
      ->required();
  cmd->add_option("--calibration", o->calibration, "Calibration file from loom calibrate");
  cmd->add_option("--precision", o->precision,
                  "fp32 or bf16: price the job in this precision (overrides `precision` and "
                  "plan.precision)")
      ->check(PrecisionFlag());
  cmd->add_option("--top", o->top, "Plans to show")->check(CLI::Range(1, 100));
  cmd->add_flag("--explain", o->explain, "Explain why the first plan wins");
  cmd->add_flag("--json", o->json, "Print JSON instead of the table");
  cmd->callback([o, exit_code] {
    Status st = RunPlan(*o);
    *exit_code = st.ok() ? 0 : ReportError("plan", st);
  });
}

}  // namespace loom
