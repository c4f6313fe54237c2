// Starting the workers of a job and stopping them: the command line for each launcher (pure) and
// the process that runs it.
//   mpirun  mpirun -np W [--hostfile F] [--oversubscribe] -x LOOM_COORDINATOR -x LOOM_JOB_TOKEN
//           loom worker          (localhost by default; a hostfile from the manifest otherwise)
//   srun    srun --mpi=pmix -n W --export=ALL loom worker   (inside a Slurm allocation)
//   none    nothing is started: the workers are started by someone else
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/status.h"

namespace loom {

enum class LauncherKind { kMpirun, kSrun, kNone };
Result<LauncherKind> ParseLauncher(const std::string& name);  // mpirun | srun | none
const char* LauncherName(LauncherKind kind);

struct LaunchCommand {
  LauncherKind kind = LauncherKind::kMpirun;
  int world = 1;
  std::string loom;            // the loom binary the workers run
  std::string hostfile;        // mpirun: "" for localhost
  bool oversubscribe = false;  // more ranks than cores on a host
  bool as_root = false;        // mpirun refuses root unless told
  int threads = 0;             // --threads for the workers (0: their default)
};

// The argv of the launcher (empty for kNone).
std::vector<std::string> LauncherArgv(const LaunchCommand& c);
// Writes an mpirun hostfile ("host slots=N" lines) to `path`.
Status WriteHostfile(const std::string& path, const std::vector<std::string>& hosts,
                     const std::vector<int>& slots);

// A launcher process in its own process group, so that stopping it stops every worker it
// started and a Ctrl-C at the terminal reaches only `loom launch`, which decides what to do.
class WorkerProcesses {
 public:
  // `env` entries "NAME=value" are added to the inherited environment.
  static Result<WorkerProcesses> Start(const std::vector<std::string>& argv,
                                       const std::vector<std::string>& env);
  // True (and the exit status in *status) once the launcher has exited; never blocks.
  bool Exited(int* status);
  // SIGTERM to the group, then SIGKILL after `grace_ms`; waits for the launcher.
  void Stop(int grace_ms);
  // `sig` to the launcher process alone (mpirun and srun pass SIGUSR1/SIGUSR2 on to the ranks).
  void Signal(int sig);
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

// "exited with status 3", "killed by signal 9 (Killed)".
std::string DescribeExit(int status);

}  // namespace loom
