// The `loom` subcommands. Each returns the process exit code (0 ok, 1 failure); errors are
// printed as "loom <command>: error: <message>".
#pragma once

#include <string>

#include "core/status.h"

namespace CLI {
class App;
}

namespace loom {

struct JobOverrides;

// Registers `loom train` on the app; the callback runs the command.
void AddTrainCommand(CLI::App& app, int* exit_code);
// Registers `loom data prepare`.
void AddDataCommand(CLI::App& app, int* exit_code);
// Registers `loom schedule`.
void AddScheduleCommand(CLI::App& app, int* exit_code);
// Registers `loom launch` and `loom coordinator` (docs/COORDINATOR.md).
void AddLaunchCommand(CLI::App& app, int* exit_code);
void AddCoordinatorCommand(CLI::App& app, int* exit_code);
// Registers `loom worker` (one rank of a coordinated job).
void AddWorkerCommand(CLI::App& app, int* exit_code);
// Registers `loom ckpt inspect|verify|reshard|export`.
void AddCkptCommand(CLI::App& app, int* exit_code);
// Registers `loom plan` (layout search, docs/PLANNER.md).
void AddPlanCommand(CLI::App& app, int* exit_code);
// Registers `loom calibrate` (measures this machine for the planner).
void AddCalibrateCommand(CLI::App& app, int* exit_code);
// Registers `loom trace show` (post-mortems, docs/FAULTS.md).
void AddTraceCommand(CLI::App& app, int* exit_code);
// Registers `loom dashboard RUN_DIR` (a run's status page from its series, docs/OBSERVABILITY.md).
void AddDashboardCommand(CLI::App& app, int* exit_code);

// The job settings `loom train`, `loom launch` and `loom coordinator` take as flags: --steps,
// --checkpoint-dir, --load, --init-from, --no-resume, --exit-after-minutes (into `opt`, applied
// by ApplyOverrides).
void AddJobOverrideOptions(CLI::App* cmd, JobOverrides* opt);

// Prints an error for the user: the message without the source-location trail (kept with
// LOOM_LOG_LEVEL=DEBUG).
int ReportError(const std::string& command, const Status& status);
// The rank this process's launcher gave it (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or
// SLURM_PROCID), for before MPI says; -1 when none did.
int LauncherRank();
// ReportError for an error before the ranks of a multi-process launch have met: a bad job file
// fails every rank alike, so rank 0 says it and the others wait kStartupErrorGraceMs first (the
// launcher stops them once rank 0 has exited with it), then say it naming their rank (an error of
// their own).
int ReportStartupError(const std::string& command, const Status& status);
inline constexpr int kStartupErrorGraceMs = 3000;

}  // namespace loom
