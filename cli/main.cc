// loom: one binary, one subcommand per capability.
//   loom train --config job.yaml        single-process training (see docs/JOB.md)
//   loom data prepare --input corpus.txt --output-dir dir
//   loom schedule --pp 4 --vpp 2 --microbatches 8 --schedule interleaved
//   loom ckpt inspect|verify|reshard|export DIR ...
//   loom launch job.yaml [--cluster c.yaml]   plan, start the workers, coordinate them
//   loom coordinator job.yaml --np N          the service alone; loom worker: one rank
//   loom plan --cluster c.yaml --job j.yaml [--explain]   layout search (docs/PLANNER.md)
//   loom calibrate --job j.yaml --output cal.json         measure this machine for the planner
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include "cli/commands.h"
#include "core/blas_kernels.h"
#include "core/logging.h"
#include "core/threads.h"
#include "core/tunables.h"
#include "core/version.h"
#include "fault/inject.h"

namespace {

// CLI11 reports a mistyped subcommand (`loom ckpt inspekt`) as "A subcommand is required": name
// it and list the choices instead. Walks the leading words of the command line down the tree.
bool ReportUnknownSubcommand(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  std::string path = "loom";
  for (int i = 1; i < argc && argv[i][0] != '-'; ++i) {
    const auto subs = at->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty()) return false;  // a command's own arguments from here
    CLI::App* next = nullptr;
    std::string names;
    for (const CLI::App* s : subs) {
      if (s->get_name() == argv[i]) next = const_cast<CLI::App*>(s);
      names += (names.empty() ? "" : ", ") + s->get_name();
    }
    if (next == nullptr) {
      std::fprintf(stderr, "%s: error: unknown command '%s' (expected one of: %s)\n", path.c_str(),
                   argv[i], names.c_str());
      return true;
    }
    at = next;
    path += " " + next->get_name();
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  loom::UseBestBlasKernels(argv);  // may re-execute this program (core/blas_kernels.h)
  loom::StopBlasServerThreads();
  CLI::App app{"Loom: distributed training orchestrator for GPT-style transformers", "loom"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("loom ") + loom::kLoomVersion);
  int exit_code = 0;
  loom::AddTrainCommand(app, &exit_code);
  loom::AddDataCommand(app, &exit_code);
  loom::AddScheduleCommand(app, &exit_code);
  loom::AddCkptCommand(app, &exit_code);
  loom::AddLaunchCommand(app, &exit_code);
  loom::AddCoordinatorCommand(app, &exit_code);
  loom::AddWorkerCommand(app, &exit_code);
  loom::AddPlanCommand(app, &exit_code);
  loom::AddCalibrateCommand(app, &exit_code);
  loom::AddTraceCommand(app, &exit_code);
  loom::AddDashboardCommand(app, &exit_code);
  // Before any command runs (and before `loom launch` hands the environment to its workers).
  for (loom::Status st : {loom::CheckTunables(), loom::InstallFaultInjection()}) {
    if (!st.ok()) {
      std::fprintf(stderr, "loom: error: %s\n", st.message().c_str());
      return 2;
    }
  }
  if (ReportUnknownSubcommand(app, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::bad_alloc&) {
    // Errors are Status values; what still throws is the allocator (or a library's parser):
    // report it rather than abort with a core dump.
    std::fprintf(stderr, "loom: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom: error: %s\n", e.what());
    return 1;
  }
  // What a command printed (a table, a report) may not have reached its destination: a full
  // disk or a closed pipe must not exit 0.
  if ((std::fflush(stdout) != 0 || std::ferror(stdout)) && exit_code == 0) {
    std::fprintf(stderr, "loom: error: writing the standard output failed: %s\n",
                 std::strerror(errno));
    return 1;
  }
  return exit_code;
}
