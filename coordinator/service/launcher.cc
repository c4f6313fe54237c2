// Launcher command lines and the worker process group.
#include "coordinator/service/launcher.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

extern char** environ;

namespace loom {

Result<LauncherKind> ParseLauncher(const std::string& name) {
  if (name == "mpirun") return LauncherKind::kMpirun;
  if (name == "srun") return LauncherKind::kSrun;
  if (name == "none") return LauncherKind::kNone;
  return InvalidArgument("launcher: expected mpirun, srun or none, got '" + name + "'");
}

const char* LauncherName(LauncherKind kind) {
  switch (kind) {
    case LauncherKind::kMpirun:
      return "mpirun";
    case LauncherKind::kSrun:
      return "srun";
    case LauncherKind::kNone:
      return "none";
  }
  return "?";
}

std::vector<std::string> LauncherArgv(const LaunchCommand& c) {
  std::vector<std::string> argv;
  if (c.kind == LauncherKind::kNone) return argv;
  if (c.kind == LauncherKind::kMpirun) {
    argv = {"mpirun", "-np", std::to_string(c.world)};
    if (!c.hostfile.empty()) argv.insert(argv.end(), {"--hostfile", c.hostfile});
    if (c.oversubscribe) argv.push_back("--oversubscribe");
    if (c.as_root) argv.push_back("--allow-run-as-root");
    argv.insert(argv.end(), {"-x", "LOOM_COORDINATOR", "-x", "LOOM_JOB_TOKEN"});
  } else {
    argv = {"srun", "--mpi=pmix", "-n", std::to_string(c.world), "--export=ALL"};
  }
  argv.insert(argv.end(), {c.loom, "worker"});
  if (c.threads > 0) argv.insert(argv.end(), {"--threads", std::to_string(c.threads)});
  return argv;
}

Status WriteHostfile(const std::string& path, const std::vector<std::string>& hosts,
                     const std::vector<int>& slots) {
  std::ofstream f(path);
  for (size_t i = 0; i < hosts.size(); ++i) f << hosts[i] << " slots=" << slots[i] << "\n";
  f.close();
  if (!f) return IoError("write hostfile '" + path + "'");
  return Status::Ok();
}

Result<WorkerProcesses> WorkerProcesses::Start(const std::vector<std::string>& argv,
                                               const std::vector<std::string>& env) {
  if (argv.empty()) return InvalidArgument("no launcher command");
  // The inherited environment, minus the variables `env` sets (the first of duplicates wins).
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& mine : env)
      replaced |= mine.compare(0, name.size() + 1, name + "=") == 0;
    if (!replaced) envs.push_back(entry);
  }
  envs.insert(envs.end(), env.begin(), env.end());
  std::vector<char*> cargv, cenv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const std::string& e : envs) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group (signals to the group reach every worker), with default signal
  // handling and nothing blocked, whatever `loom launch` itself has set up.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGCHLD);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  WorkerProcesses p;
  const int rc = posix_spawnp(&p.pid_, cargv[0], nullptr, &attr, cargv.data(), cenv.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return ErrnoError("start '" + argv[0] + "'", rc);
  return p;
}

bool WorkerProcesses::Exited(int* status) {
  if (!reaped_) {
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      status_ = st;
    }
  }
  if (reaped_) *status = status_;
  return reaped_;
}

void WorkerProcesses::Signal(int sig) {
  int st = 0;
  if (pid_ > 0 && !Exited(&st)) ::kill(pid_, sig);
}

void WorkerProcesses::Stop(int grace_ms) {
  int st = 0;
  if (pid_ <= 0 || Exited(&st)) return;
  ::kill(-pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (!Exited(&st) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling a child's exit
  }
  ::kill(-pid_, SIGKILL);
  if (!reaped_) {
    ::waitpid(pid_, &status_, 0);
    reaped_ = true;
  }
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "ended with status " + std::to_string(status);
}

}  // namespace loom
