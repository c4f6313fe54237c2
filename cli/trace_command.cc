// `loom trace show DIR`: a post-mortem that `loom launch` wrote when a job failed or restarted
// (docs/FAULTS.md): every rank's state at the end, the calls of the last step around the failure,
// and the detector's verdict, replayed from the evidence and as it was given live.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "coordinator/supervisor/post_mortem.h"

namespace loom {
namespace {

Status RunTraceShow(const std::string& dir) {
  LOOM_ASSIGN_OR_RETURN(const PostMortem pm, ReadPostMortem(dir));
  std::fputs(DescribePostMortem(pm).c_str(), stdout);
  return Status::Ok();
}

}  // namespace

void AddTraceCommand(CLI::App& app, int* exit_code) {
  CLI::App* trace = app.add_subcommand("trace", "Read the per-call traces a failed job left");
  trace->require_subcommand(1);
  auto dir = std::make_shared<std::string>();
  CLI::App* show = trace->add_subcommand(
      "show", "Per-rank timeline around a failure and the detector's verdict");
  show->add_option("dir", *dir, "A post-mortem directory (<checkpoint dir>/trace/epoch_N)")
      ->required();
  show->callback([dir, exit_code] {
    const Status st = RunTraceShow(*dir);
    *exit_code = st.ok() ? 0 : ReportError("trace show", st);
  });
}

}  // namespace loom
