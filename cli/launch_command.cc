// `loom launch JOB [--cluster C]`: plan, coordinate and run a job end to end. The coordinator
// runs in this process: it chooses the layout (the job's `parallel:` section, completed by the
// planner), serves the workers (docs/COORDINATOR.md), starts them through the launcher (mpirun
// on this machine by default, srun inside a Slurm allocation, or none), shows one live progress
// line, and returns 0 only when every rank finished training. On Ctrl-C, a worker failure or a
// worker that falls silent it stops every worker and says what happened.
//
// `loom coordinator JOB --np N` is the same service without a launcher: it prints how to start
// the workers and waits for them.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include "cli/commands.h"
#include "coordinator/service/launch_plan.h"
#include "coordinator/service/launcher.h"
#include "coordinator/service/service.h"
#include "core/logging.h"
#include "worker/job_config.h"

namespace loom {
namespace {

struct LaunchOptions {
  std::string job, cluster, calibration, launcher, address = "127.0.0.1", token;
  int np = 0, port = 0, threads = 0;
  int heartbeat_ms = 2000;
  double silence_s = 60;  // a rank not heard from this long is declared lost
};

std::string RandomToken() {
  std::random_device rd;
  char buf[33];
  for (int i = 0; i < 4; ++i) std::snprintf(buf + 8 * i, 9, "%08x", rd());
  return buf;
}

std::string Duration(double s) {
  char buf[32];
  const int t = static_cast<int>(s + 0.5);
  if (t >= 3600) {
    std::snprintf(buf, sizeof(buf), "%dh%02dm", t / 3600, (t / 60) % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%dm%02ds", t / 60, t % 60);
  }
  return buf;
}

// This executable, for the workers (they run the same build).
std::string SelfPath() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "loom" : p.string();
}

class Monitor {
 public:
  Monitor(const JobState& job, int log_every) : job_(job), log_every_(std::max(1, log_every)) {
    tty_ = ::isatty(STDOUT_FILENO) != 0;
  }

  // `final`: the last line (printed unless this step's line already was).
  void Update(bool final) {
    const Progress p = job_.GetProgress();
    if (p.step == shown_ || (p.step == 0 && !final)) return;
    // A line each time a multiple of log_every is passed (the terminal's line updates in place).
    const bool line = final || p.step / log_every_ != std::max<int64_t>(0, shown_) / log_every_ ||
                      p.step == job_.spec().steps;
    if (!tty_ && !line) return;
    shown_ = p.step;
    std::printf(
        "%sstep %5lld/%lld | loss %.4f | %7.0f tok/s | MFU %5.2f%% | %7.1f ms/step | ETA %s%s",
        tty_ ? "\r" : "", static_cast<long long>(p.step), static_cast<long long>(job_.spec().steps),
        p.loss, p.tokens_per_s, 100 * p.mfu, p.step_s * 1e3, Duration(p.eta_s).c_str(),
        tty_ && !line ? "" : "\n");
    std::fflush(stdout);
  }

 private:
  const JobState& job_;
  int log_every_;
  bool tty_ = false;
  int64_t shown_ = -1;
};

// Why the job failed, from what the ranks said (or did not say).
std::string DescribeFailure(const JobState& job) {
  std::string out;
  int silent = 0;
  const std::vector<RankStatus> ranks = job.Ranks();
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankStatus& s = ranks[r];
    if (s.done && !s.ok) {
      out += "\n  rank " + std::to_string(r) + " (" + s.host + ", pid " + std::to_string(s.pid) +
             ") failed after step " + std::to_string(s.step) + ": " + s.error;
    } else if (!s.done) {
      ++silent;
    }
  }
  if (silent > 0) {
    out += "\n  " + std::to_string(silent) + " rank(s) ended without reporting (killed, or " +
           "stopped by the others' failure)";
  }
  return out;
}

Status RunLaunch(const LaunchOptions& o, LauncherKind kind) {
  // Everything is checked before anything starts: the job as the workers will read it, the
  // manifest, the layout.
  LOOM_ASSIGN_OR_RETURN(JobConfig job, LoadJobConfig(o.job));
  Cluster cluster;
  if (o.cluster.empty()) {
    LOOM_ASSIGN_OR_RETURN(cluster, LocalhostCluster(o.np > 0 ? o.np : 4));
  } else {
    LOOM_ASSIGN_OR_RETURN(cluster, LoadCluster(o.cluster));
  }
  Calibration cal;
  if (!o.calibration.empty()) {
    LOOM_ASSIGN_OR_RETURN(cal, LoadCalibration(o.calibration));
  }
  LOOM_ASSIGN_OR_RETURN(LaunchPlan plan, PlanLaunch(o.job, cluster, cal, o.np));
  plan.spec.token = o.token.empty() ? RandomToken() : o.token;
  plan.spec.heartbeat_ms = o.heartbeat_ms;
  const int world = plan.spec.layout.world();

  // Signals are handled by this thread only (sigtimedwait below): block them before any other
  // thread exists so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  JobState state(plan.spec);
  ServiceOptions so;
  so.address = o.address;
  so.port = o.port;
  so.idle_timeout_ms = static_cast<int>(o.silence_s * 1000);
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorService> service,
                        CoordinatorService::Start(&state, so));
  std::printf("loom %s: %s | %d ranks via %s | layout %s (%s)\n",
              kind == LauncherKind::kNone ? "coordinator" : "launch", o.job.c_str(), world,
              LauncherName(kind), plan.spec.layout.ToString().c_str(), plan.how.c_str());
  if (!plan.prediction.empty()) std::printf("  %s\n", plan.prediction.c_str());
  std::printf("  coordinator at %s\n", service->endpoint().c_str());
  std::fflush(stdout);

  LaunchCommand cmd;
  cmd.kind = kind;
  cmd.world = world;
  cmd.loom = SelfPath();
  cmd.threads = o.threads;
  cmd.as_root = ::geteuid() == 0;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (plan.hosts.size() > 1) {
    cmd.hostfile =
        std::filesystem::temp_directory_path() / ("loom-hostfile-" + std::to_string(::getpid()));
    LOOM_RETURN_IF_ERROR(WriteHostfile(cmd.hostfile, plan.hosts, plan.slots));
  } else {
    cmd.oversubscribe = world > static_cast<int>(cores);
  }
  std::optional<WorkerProcesses> workers;
  if (kind == LauncherKind::kNone) {
    std::printf(
        "  start %d workers, e.g.: LOOM_COORDINATOR=%s LOOM_JOB_TOKEN=%s mpirun -np %d "
        "%s worker\n",
        world, service->endpoint().c_str(), plan.spec.token.c_str(), world, cmd.loom.c_str());
    std::fflush(stdout);
  } else {
    if (kind == LauncherKind::kSrun && std::getenv("SLURM_JOB_ID") == nullptr) {
      return FailedPrecondition(
          "--launcher srun: run loom launch inside a Slurm allocation "
          "(salloc or sbatch)");
    }
    LOOM_ASSIGN_OR_RETURN(
        workers,
        WorkerProcesses::Start(LauncherArgv(cmd), {"LOOM_COORDINATOR=" + service->endpoint(),
                                                   "LOOM_JOB_TOKEN=" + plan.spec.token}));
  }

  Monitor monitor(state, static_cast<int>(job.runtime.log_every));
  const auto start = std::chrono::steady_clock::now();
  Status result;
  for (;;) {
    timespec wait{0, 250 * 1000 * 1000};
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) {
      std::printf("\nloom launch: interrupted (%s): stopping %d workers\n", strsignal(sig), world);
      std::fflush(stdout);
      if (workers) workers->Stop(5000);
      return Status(StatusCode::kFailedPrecondition, "interrupted");
    }
    monitor.Update(false);
    int status = 0;
    const Progress p = state.GetProgress();
    if (workers && workers->Exited(&status)) {
      if (status == 0 && p.done == world && p.failed == 0) break;
      result = Internal("the workers " + DescribeExit(status) + DescribeFailure(state));
      break;
    }
    if (!workers && p.done == world) {
      if (p.failed > 0) result = Internal("workers failed" + DescribeFailure(state));
      break;
    }
    const std::vector<int> silent = state.Silent(service->Now(), o.silence_s);
    if (!silent.empty()) {
      const RankStatus s = state.Ranks().at(static_cast<size_t>(silent[0]));
      result = DeadlineExceeded("rank " + std::to_string(silent[0]) + " (" + s.host + ", pid " +
                                std::to_string(s.pid) + ") has not been heard from for " +
                                std::to_string(static_cast<int>(o.silence_s)) + " s (last step " +
                                std::to_string(s.step) + ")");
      if (workers) workers->Stop(5000);
      break;
    }
    if (p.registered < world &&
        std::chrono::steady_clock::now() - start > std::chrono::duration<double>(o.silence_s)) {
      result = DeadlineExceeded(std::to_string(world - p.registered) + " of " +
                                std::to_string(world) + " workers did not register within " +
                                std::to_string(static_cast<int>(o.silence_s)) + " s");
      if (workers) workers->Stop(5000);
      break;
    }
  }
  monitor.Update(true);
  const ServiceStats st = service->stats();
  if (st.rejected_token + st.rejected_malformed + st.rejected_oversized + st.rejected_protocol >
      0) {
    std::printf(
        "coordinator: rejected %lld connection(s) (wrong token %lld, malformed %lld, "
        "oversized %lld, protocol %lld)\n",
        static_cast<long long>(st.rejected_token + st.rejected_malformed + st.rejected_oversized +
                               st.rejected_protocol),
        static_cast<long long>(st.rejected_token), static_cast<long long>(st.rejected_malformed),
        static_cast<long long>(st.rejected_oversized),
        static_cast<long long>(st.rejected_protocol));
  }
  if (!cmd.hostfile.empty()) std::filesystem::remove(cmd.hostfile);
  LOOM_RETURN_IF_ERROR(result);
  const Progress p = state.GetProgress();
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (p.final) {
    const proto::Done& d = *p.final;
    std::printf("done in %s: %lld steps | train loss %.4f | val loss %.4f | %.0f tok/s\n",
                Duration(total).c_str(), static_cast<long long>(d.step()), d.train_loss(),
                d.val_loss(), d.tokens_per_s());
    if (!d.sample().empty()) std::printf("--- sample ---\n%s\n---\n", d.sample().c_str());
    if (!d.checkpoint().empty()) std::printf("checkpoints: %s\n", d.checkpoint().c_str());
  }
  return Status::Ok();
}

void AddOptions(CLI::App* cmd, LaunchOptions* o) {
  cmd->add_option("job", o->job, "Job file (docs/JOB.md)")->required();
  cmd->add_option("--cluster", o->cluster,
                  "Cluster manifest (docs/MANIFESTS.md; default: this machine)");
  cmd->add_option("--calibration", o->calibration, "Calibration file from loom calibrate");
  cmd->add_option("--np", o->np, "Ranks (default: 4 on this machine, every device of a cluster)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--port", o->port, "Coordinator port (default: any free port)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--address", o->address, "Coordinator address to listen on");
  cmd->add_option("--token", o->token, "Job token (default: random)");
  cmd->add_option("--threads", o->threads, "Threads per worker (default: cores / ranks)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--heartbeat-ms", o->heartbeat_ms, "Worker heartbeat period")
      ->check(CLI::Range(100, 600000));
  cmd->add_option("--silence-s", o->silence_s, "A worker not heard from this long is declared lost")
      ->check(CLI::Range(1.0, 86400.0));
}

}  // namespace

void AddLaunchCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<LaunchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "launch", "Plan a job, start its workers and coordinate them until it finishes");
  AddOptions(cmd, o.get());
  cmd->add_option("--launcher", o->launcher,
                  "mpirun, srun or none (default: the job's `launcher:`, else mpirun)");
  cmd->callback([o, exit_code] {
    std::string name = o->launcher;
    if (name.empty()) {  // the job's choice; a bad job is reported by RunLaunch
      Result<JobConfig> job = LoadJobConfig(o->job);
      name = job.ok() && !job->launcher.empty() ? job->launcher : "mpirun";
    }
    Result<LauncherKind> kind = ParseLauncher(name);
    Status st = kind.ok() ? RunLaunch(*o, *kind) : kind.status().WithContext("--launcher");
    *exit_code = st.ok() ? 0 : st.message() == "interrupted" ? 130 : ReportError("launch", st);
  });
}

void AddCoordinatorCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<LaunchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "coordinator", "Run the coordinator service for workers started elsewhere (srun, by hand)");
  AddOptions(cmd, o.get());
  cmd->callback([o, exit_code] {
    Status st = RunLaunch(*o, LauncherKind::kNone);
    *exit_code = st.ok() ? 0 : st.message() == "interrupted" ? 130 : ReportError("coordinator", st);
  });
}

}  // namespace loom
