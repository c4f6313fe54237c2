// `loom dashboard RUN_DIR`: the status page of a finished (or still running) run, from the series
// its coordinator kept in RUN_DIR/series.jsonl (docs/OBSERVABILITY.md). Serves until Ctrl-C or
// SIGTERM, or for --for-s seconds; re-reads the file on every request, so a run that is still
// writing it shows its latest steps.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include "cli/commands.h"
#include "coordinator/metrics/http_server.h"
#include "coordinator/metrics/metrics_service.h"
#include "coordinator/metrics/run_record.h"
#include "coordinator/metrics/status_routes.h"
#include "core/file_util.h"
#include "core/signals.h"

namespace loom {
namespace {

struct DashboardOptions {
  std::string run_dir;
  std::string address = "127.0.0.1";
  int port = 0;
  double for_s = 0;  // 0: until a signal
};

// The run's status as its last event says.
std::string StatusOf(const RunHistory& h) {
  for (auto it = h.events.rbegin(); it != h.events.rend(); ++it) {
    if (EndsRun(it->kind)) return it->kind;
  }
  return "ended without a last word (killed, or still running)";
}

Result<RunHistory> LoadRun(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return ParseRunLog(text, path);
}

Status RunDashboard(const DashboardOptions& o) {
  const std::string path = SeriesPath(o.run_dir);
  // Checked before serving: a directory without a series is named now, not on the first load.
  LOOM_ASSIGN_OR_RETURN(const RunHistory first, LoadRun(path));
  SignalWaiter signals(
      RecordSignals({SIGINT, SIGTERM, SIGHUP}, OnRepeat::kRecordAgain, IfIgnored::kTakeOver));
  StatusSource source;
  source.view = [path](size_t max_steps) {
    Result<RunHistory> h = LoadRun(path);
    if (!h.ok()) {
      RunHistory none;
      return HistoryJson(none, false, "unreadable: " + h.status().message(), max_steps);
    }
    return HistoryJson(*h, false, StatusOf(*h), max_steps);
  };
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> http,
                        HttpServer::Start(o.address, o.port, [source](const std::string& t) {
                          return ServeStatus(source, t);
                        }));
  std::printf("loom dashboard: %s (%zu steps, %zu events, %s) at %s/\n", path.c_str(),
              first.steps.size(), first.events.size(), StatusOf(first).c_str(),
              http->url().c_str());
  std::fflush(stdout);
  const auto until = o.for_s > 0
                         ? std::chrono::steady_clock::now() +
                               std::chrono::milliseconds(static_cast<int64_t>(o.for_s * 1000))
                         : std::chrono::steady_clock::time_point::max();
  while (std::chrono::steady_clock::now() < until) {
    const int sig =
        signals.Wait(std::min(until, std::chrono::steady_clock::now() + std::chrono::seconds(1)));
    if (sig != 0) {
      std::printf("loom dashboard: stopped (%s)\n", strsignal(sig));
      break;
    }
  }
  http->Stop();
  return Status::Ok();
}

}  // namespace

void AddDashboardCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<DashboardOptions>();
  CLI::App* cmd = app.add_subcommand(
      "dashboard", "Serve the status page of a run from the series kept in its run directory");
  cmd->add_option("run_dir", o->run_dir,
                  "The run directory (metrics.run_dir, or the checkpoint directory)")
      ->required();
  cmd->add_option("--address", o->address, "Address to listen on");
  cmd->add_option("--port", o->port, "Port (default: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--for-s", o->for_s, "Serve this long, then exit (default: until Ctrl-C)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->callback([o, exit_code] {
    const Status st = RunDashboard(*o);
    *exit_code = st.ok() ? 0 : ReportError("dashboard", st);
  });
}

}  // namespace loom
