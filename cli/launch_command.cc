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
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>

#include <yaml-cpp/yaml.h>
#include "checkpoint/format.h"

#include "cli/commands.h"
#include "cli/train_run.h"
#include "cli/validators.h"
#include "coordinator/service/launch_plan.h"
#include "coordinator/service/launcher.h"
#include "coordinator/service/service.h"
#include "core/logging.h"
#include "core/progress_line.h"
#include "core/signals.h"
#include "core/stop_signal.h"
#include "worker/checkpointer.h"
#include "worker/job_config.h"

namespace loom {
namespace {

struct LaunchOptions {
  std::string job, cluster, calibration, launcher, address = "127.0.0.1", advertise, token;
  int np = 0, port = 0, threads = 0;
  int heartbeat_ms = 2000;
  double silence_s = 60;  // a rank not heard from this long is declared lost
  // The job's settings `loom train` also takes as flags (AddJobOverrideOptions; the other fields
  // of TrainOptions stay empty).
  TrainOptions overrides;
};

// Writes the command-line overrides into the job text every worker parses. Paths are made
// absolute: the flags are relative to this directory, the job's own paths to the job file's.
Status WriteOverrides(const TrainOptions& t, const JobConfig& job, std::string* job_yaml) {
  if (t.steps == 0 && t.checkpoint_dir.empty() && t.load.empty() && t.init_from.empty() &&
      !t.no_resume && t.exit_after_minutes == 0 && !t.no_load_optimizer) {
    return Status::Ok();
  }
  YAML::Node root;
  try {
    root = YAML::Load(*job_yaml);
  } catch (const YAML::Exception& e) {
    return Internal(std::string("the planned job: ") + e.what());
  }
  auto absolute = [](const std::string& p) { return std::filesystem::absolute(p).string(); };
  if (t.steps > 0) {
    root["steps"] = t.steps;
    // As for `loom train --steps`: the decay stays where the job file puts it (its `steps` when
    // decay_steps is not given), which the workers would otherwise take from the new steps.
    root["schedule"]["decay_steps"] = job.schedule.decay_steps;
  }
  if (!t.checkpoint_dir.empty()) root["checkpoint"]["dir"] = absolute(t.checkpoint_dir);
  if (!t.load.empty()) root["checkpoint"]["load"] = absolute(t.load);
  if (!t.init_from.empty()) root["checkpoint"]["init_from"] = absolute(t.init_from);
  if (t.no_resume) root["checkpoint"]["resume"] = false;
  if (t.no_load_optimizer) root["checkpoint"]["load_optimizer"] = false;
  if (t.exit_after_minutes > 0) root["checkpoint"]["exit_after_minutes"] = t.exit_after_minutes;
  YAML::Emitter emit;
  emit << root;
  *job_yaml = emit.c_str();
  return Status::Ok();
}

std::string RandomToken() {
  std::random_device rd;
  char buf[33];
  for (int i = 0; i < 4; ++i) std::snprintf(buf + 8 * i, 9, "%08x", rd());
  return buf;
}

// This executable, for the workers (they run the same build).
std::string SelfPath() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "loom" : p.string();
}

// A file made with mkstemp, removed when this goes out of scope.
struct TempFile {
  std::string path;
  ~TempFile() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

Result<std::string> MakeTempFile(const std::string& stem) {
  std::string path = (std::filesystem::temp_directory_path() / (stem + "-XXXXXX")).string();
  const int fd = ::mkstemp(path.data());
  if (fd < 0) return ErrnoError("create a temporary file", errno);
  ::close(fd);
  return path;
}

// The live progress line from the complete steps (core/progress_line.h).
class Monitor {
 public:
  Monitor(const JobState& job, int log_every)
      : job_(job),
        line_({.in_place = StdoutUpdatesInPlace(/*one_process=*/true),
               .log_every = log_every,
               .steps = job.spec().steps}) {}

  // `final`: the last line (printed unless this step's line already was).
  void Update(bool final) {
    const Progress p = job_.GetProgress();
    line_.Show(p.step, final, "loss %.4f | %7.0f tok/s | MFU %5.2f%% | %7.1f ms/step | ETA %s",
               p.loss, p.tokens_per_s, 100 * p.mfu, p.step_s * 1e3,
               FormatDuration(p.eta_s).c_str());
  }

 private:
  const JobState& job_;
  ProgressLine line_;
};

// Whether process `pid` still runs: it exists and is not a zombie (a zombie has closed its files
// and released its locks; its reaping, by init here, can take a while).
bool Running(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // no /proc: trust kill
  const size_t paren = line.rfind(')');        // "pid (comm) S ...": comm may hold spaces
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
}

// Why the job failed, from what the ranks said (or did not say).
std::string DescribeFailure(const JobState& job) {
  std::string out;
  std::vector<int> silent;
  const std::vector<RankStatus> ranks = job.Ranks();
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankStatus& s = ranks[r];
    if (s.done && !s.ok) {
      // Step 0: no step reported (failed while starting or loading a checkpoint).
      out += "\n  rank " + std::to_string(r) + " (" + s.host + ", pid " + std::to_string(s.pid) +
             ") failed " +
             (s.step > 0 ? "after step " + std::to_string(s.step)
                         : std::string("before its first step")) +
             ": " + s.error;
    } else if (!s.done) {
      silent.push_back(static_cast<int>(r));
    }
  }
  if (!silent.empty()) {
    // Named, since a hung rank is often among them (the others report its deadline).
    constexpr size_t kNamed = 8;
    std::string list;
    for (size_t i = 0; i < std::min(silent.size(), kNamed); ++i) {
      list += (i ? ", " : "") + std::to_string(silent[i]);
    }
    if (silent.size() > kNamed) list += " and " + std::to_string(silent.size() - kNamed) + " more";
    out += "\n  " + std::string(silent.size() == 1 ? "rank " : "ranks ") + list +
           " ended without reporting (hung or killed, or stopped by the others' failure)";
  }
  return out;
}

// The signal every rank stopped on after saving the same step (checkpoint.signal), with that
// step; 0 when any rank finished, failed or is still running, or they disagree.
int StoppedBySignal(const JobState& job, int64_t* step) {
  const std::vector<RankStatus> ranks = job.Ranks();
  if (ranks.empty() || ranks[0].stopped_by == 0) return 0;
  for (const RankStatus& r : ranks) {
    if (!r.done || r.stopped_by != ranks[0].stopped_by || r.step != ranks[0].step) return 0;
  }
  *step = ranks[0].step;
  return ranks[0].stopped_by;
}

// The ranks furthest behind, for a job that stopped making progress.
std::string DescribeLaggards(const JobState& job) {
  const std::vector<RankStatus> ranks = job.Ranks();
  int64_t low = INT64_MAX;
  for (const RankStatus& r : ranks) low = std::min(low, r.step);
  std::string who;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].step == low) {
      who += (who.empty() ? "" : ", ") + std::to_string(i) + " (" + ranks[i].host + ", pid " +
             std::to_string(ranks[i].pid) + ")";
    }
  }
  return "; furthest behind at step " + std::to_string(low) + ": rank " + who;
}

Status RunLaunch(const LaunchOptions& o, LauncherKind kind, int* stopped_by) {
  // Everything is checked before anything starts: the job as the workers will read it, the
  // manifest, the layout.
  LOOM_ASSIGN_OR_RETURN(JobConfig job, LoadJobConfig(o.job));
  LOOM_RETURN_IF_ERROR(ApplyOverrides(o.overrides, &job));
  // What the workers would each refuse, named by the flag the user typed, before any starts.
  if (!job.checkpoint.dir.empty()) {
    LOOM_RETURN_IF_ERROR(
        CheckOutsideCheckpoints(job.checkpoint.dir, "", CheckpointSetting(job, "dir")));
  }
  for (const auto& [flag, path] :
       {std::pair<const char*, const std::string*>{"--load", &o.overrides.load},
        {"--init-from", &o.overrides.init_from}}) {
    std::error_code ec;
    if (!path->empty() && !std::filesystem::exists(*path, ec)) {
      return NotFound(std::string(flag) + ": no checkpoint in '" + *path +
                      "': " + (ec ? ec.message() : std::string("no such file or directory")));
    }
  }
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
  LOOM_RETURN_IF_ERROR(WriteOverrides(o.overrides, job, &plan.spec.job_yaml));
  if (job.text.size() <= kMaxRecordedJobBytes) plan.spec.job_file_text = job.text;
  plan.spec.override_args = job.overrides;
  // The job as every worker will parse it, checked here first.
  Result<JobConfig> planned = ParseJobConfig(plan.spec.job_yaml, plan.spec.job_path);
  if (!planned.ok()) return planned.status().WithContext("the planned job");
  plan.spec.steps = planned->steps;
  plan.spec.token = o.token.empty() ? RandomToken() : o.token;
  plan.spec.heartbeat_ms = o.heartbeat_ms;
  const int world = plan.spec.layout.world();

  // A signal must never take the default action (kill this process and orphan the workers),
  // whichever thread it lands on — threads created before main (OpenBLAS) have nothing blocked:
  // the handler only records it and wakes the loop below (core/signals.h). One ignored from the
  // start is taken over too: the launcher decides what each one does.
  // The job's checkpoint.signal (preemption: a scheduler may send it to this process, e.g.
  // `sbatch --signal=B:USR1@120`) is passed on to the workers, which save and stop; a second
  // one, or any other signal, stops them at once.
  const int stop_signal = job.checkpoint.dir.empty() ? 0 : job.checkpoint.stop_signal;
  SignalWaiter signals(RecordSignals({SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2},
                                     OnRepeat::kRecordAgain, IfIgnored::kTakeOver));
  // The stop signal is passed on once every rank has finished a step: by then each has its
  // handler (before, the signal would kill it).
  bool stop_received = false, stop_passed_on = false;

  JobState state(plan.spec);
  ServiceOptions so;
  so.address = o.address;
  so.port = o.port;
  so.idle_timeout_ms = static_cast<int>(o.silence_s * 1000);
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorService> service,
                        CoordinatorService::Start(&state, so));
  // What workers connect to: the listen address unless it is a wildcard.
  std::string advertise = o.advertise;
  if (advertise.empty()) {
    advertise = o.address;
    if (advertise == "0.0.0.0") {
      char host[256] = {};
      ::gethostname(host, sizeof(host) - 1);
      advertise = host;
    }
  }
  if (plan.hosts.size() > 1 && (advertise == "127.0.0.1" || advertise == "localhost")) {
    return InvalidArgument("the plan spans " + std::to_string(plan.hosts.size()) +
                           " nodes: --address must be one the other nodes can reach (e.g. "
                           "0.0.0.0) and --advertise this host's name on their network");
  }
  const std::string endpoint = advertise + ":" + std::to_string(service->port());
  std::printf("loom %s: %s | %d ranks via %s | layout %s (%s)\n",
              kind == LauncherKind::kNone ? "coordinator" : "launch", o.job.c_str(), world,
              LauncherName(kind), plan.spec.layout.ToString().c_str(), plan.how.c_str());
  if (!plan.prediction.empty()) std::printf("  %s\n", plan.prediction.c_str());
  std::printf("  coordinator at %s\n", endpoint.c_str());
  std::fflush(stdout);

  LaunchCommand cmd;
  cmd.kind = kind;
  cmd.world = world;
  cmd.loom = SelfPath();
  cmd.threads = o.threads;
  cmd.as_root = ::geteuid() == 0;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  TempFile hostfile;
  if (plan.hosts.size() > 1) {
    LOOM_ASSIGN_OR_RETURN(hostfile.path, MakeTempFile("loom-hostfile"));
    cmd.hostfile = hostfile.path;
    LOOM_RETURN_IF_ERROR(WriteHostfile(cmd.hostfile, plan.hosts, plan.slots));
  } else {
    cmd.oversubscribe = world > static_cast<int>(cores);
  }
  std::optional<WorkerProcesses> workers;
  if (kind == LauncherKind::kNone) {
    std::printf(
        "  start %d workers, e.g.: LOOM_COORDINATOR=%s LOOM_JOB_TOKEN=%s mpirun -np %d "
        "%s worker\n",
        world, endpoint.c_str(), plan.spec.token.c_str(), world, cmd.loom.c_str());
    std::fflush(stdout);
  } else {
    if (kind == LauncherKind::kSrun && std::getenv("SLURM_JOB_ID") == nullptr) {
      return FailedPrecondition(
          "--launcher srun: run loom launch inside a Slurm allocation "
          "(salloc or sbatch)");
    }
    LOOM_ASSIGN_OR_RETURN(
        workers, WorkerProcesses::Start(LauncherArgv(cmd), {"LOOM_COORDINATOR=" + endpoint,
                                                            "LOOM_JOB_TOKEN=" + plan.spec.token}));
  }
  // Stops the launcher, then kills any worker of this host it left behind (mpirun gives its
  // ranks process groups of their own).
  auto stop_workers = [&] {
    if (!workers) return;
    workers->Stop(5000);
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    std::vector<pid_t> killed;
    for (const RankStatus& r : state.Ranks()) {
      if (r.registered && r.pid > 0 && r.host == host && Running(static_cast<pid_t>(r.pid))) {
        ::kill(r.pid, SIGKILL);
        killed.push_back(static_cast<pid_t>(r.pid));
      }
    }
    // Gone before the closing lines say "the same command resumes": a rerun must not find rank 0
    // still holding the checkpoint directory's lock. Bounded: a process stuck in the kernel
    // (an NFS write) may take longer, and the rerun then waits for the lock itself.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until &&
           std::any_of(killed.begin(), killed.end(), Running)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };

  Monitor monitor(state, static_cast<int>(job.runtime.log_every));
  const auto start = std::chrono::steady_clock::now();
  auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  // The job must keep completing steps: none for this long after the last one (or after every
  // worker registered) means a rank is stuck even if its heartbeats still arrive.
  int64_t last_step = -1;
  auto last_advance = start;
  double slowest_step = 0;
  bool io_before = false;  // a rank was in checkpoint I/O at the previous check
  std::optional<std::chrono::steady_clock::time_point> ending;  // all done, or one failed
  Status result;
  int64_t stopped_at = 0;
  for (;;) {
    const int sig = signals.Wait(std::chrono::steady_clock::now() + std::chrono::milliseconds(250));
    if (sig != 0 && sig == stop_signal && !stop_received) {
      stop_received = true;
      std::printf("\nloom launch: %s: the workers save the step they are at and stop%s\n",
                  StopSignalName(sig).c_str(),
                  workers ? "" : " (their launcher passes the signal on)");
      std::fflush(stdout);
    } else if (sig != 0) {
      if (workers) {
        std::printf("\nloom launch: interrupted (%s): stopping %d workers now\n", strsignal(sig),
                    world);
        std::fflush(stdout);
        stop_workers();
        // Named once they are gone: until then they may commit (and retention delete) more.
        std::printf("loom launch: workers stopped; %s\n", DescribeRestart(job).c_str());
      } else {  // started by somebody else: they stop when they lose the coordinator
        std::printf(
            "\nloom launch: interrupted (%s): the %d workers started elsewhere stop when they "
            "lose the coordinator; so far %s\n",
            strsignal(sig), world, DescribeRestart(job).c_str());
      }
      std::fflush(stdout);
      return Status(StatusCode::kFailedPrecondition,
                    "interrupted by signal " + std::to_string(sig));
    }
    if (stop_received && !stop_passed_on && workers && state.GetProgress().step >= 1) {
      workers->Signal(stop_signal);
      stop_passed_on = true;
    }
    monitor.Update(false);
    int status = 0;
    if (workers && workers->Exited(&status)) {
      const Progress p = state.GetProgress();  // after the exit: every Done has arrived
      if (status == 0 && p.done == world && p.failed == 0) break;
      *stopped_by = StoppedBySignal(state, &stopped_at);
      if (*stopped_by != 0) break;  // saved and stopped on a signal: not a failure
      result =
          Internal(std::string(kind == LauncherKind::kSrun ? "srun" : "mpirun") +
                   " (the workers' launcher) " + DescribeExit(status) + DescribeFailure(state));
      stop_workers();
      break;
    }
    const Progress p = state.GetProgress();
    if (!workers && p.done == world) {
      *stopped_by = StoppedBySignal(state, &stopped_at);
      if (p.failed > 0 && *stopped_by == 0)
        result = Internal("workers failed" + DescribeFailure(state));
      break;
    }
    if ((p.done == world || p.failed > 0) && !ending) ending = std::chrono::steady_clock::now();
    if (ending && since(*ending) > 30) {
      result = DeadlineExceeded(
          std::string(p.failed > 0 ? "a rank failed" : "every rank finished") +
          " 30 s ago but the workers have not exited; stopping them" + DescribeFailure(state));
      stop_workers();
      break;
    }
    if (p.step != last_step || p.registered < world) {
      if (p.step != last_step) last_step = p.step;
      last_advance = std::chrono::steady_clock::now();
    }
    slowest_step = std::max(slowest_step, p.step_s);
    double stall_s = std::max(o.silence_s, 20 * std::max(slowest_step, plan.spec.predicted_step_s));
    // While a rank's heartbeats say it is loading a checkpoint or finishing its final save, no
    // step completes for as long as the I/O takes: allow that too (the workers' own waits on
    // it fail after LOOM_CKPT_TIMEOUT_MS and say so; a dead rank is still found by its
    // silence). When the I/O ends, the next step gets the usual time from then.
    bool io = false;
    for (const RankStatus& r : state.Ranks()) io = io || r.checkpoint_io;
    if (io_before && !io) last_advance = std::chrono::steady_clock::now();
    io_before = io;
    if (io) stall_s += static_cast<double>(CheckpointTimeoutMs()) / 1000;
    if (!ending && p.registered == world && since(last_advance) > stall_s) {
      result = DeadlineExceeded(
          "no step completed for " + std::to_string(static_cast<int>(stall_s)) + " s (" +
          (p.step > 0 ? "last complete step " + std::to_string(p.step)
                      : std::string(job.checkpoint.dir.empty() && job.checkpoint.load.empty() &&
                                            job.checkpoint.init_from.empty()
                                        ? "none yet"
                                        : "none yet: starting, or loading a checkpoint")) +
          ")" + DescribeLaggards(state));
      stop_workers();
      break;
    }
    const std::vector<int> silent = state.Silent(service->Now(), o.silence_s);
    if (!silent.empty()) {
      const RankStatus s = state.Ranks().at(static_cast<size_t>(silent[0]));
      result = DeadlineExceeded("rank " + std::to_string(silent[0]) + " (" + s.host + ", pid " +
                                std::to_string(s.pid) + ") has not been heard from for " +
                                std::to_string(static_cast<int>(o.silence_s)) + " s (last step " +
                                std::to_string(s.step) + ")");
      stop_workers();
      break;
    }
    if (p.registered < world && since(start) > o.silence_s) {
      result = DeadlineExceeded(std::to_string(world - p.registered) + " of " +
                                std::to_string(world) + " workers did not register within " +
                                std::to_string(static_cast<int>(o.silence_s)) + " s" +
                                DescribeFailure(state));
      stop_workers();
      break;
    }
  }
  monitor.Update(true);
  if (!result.ok()) {  // the workers are stopped: what a rerun of the same command resumes
    result = Status(result.code(), result.message() + "\n  " + DescribeRestart(job));
  }
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
  LOOM_RETURN_IF_ERROR(result);
  const Progress p = state.GetProgress();
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (*stopped_by != 0) {
    std::printf(
        "stopped after step %lld of %lld in %s on %s (all %d ranks): saved %s; the same command "
        "resumes it\n",
        static_cast<long long>(stopped_at), static_cast<long long>(job.steps),
        FormatDuration(total).c_str(), StopSignalName(*stopped_by).c_str(), world,
        JoinPath(job.checkpoint.dir, StepDirName(stopped_at)).c_str());
    return Status::Ok();
  }
  if (p.final) {
    const proto::Done& d = *p.final;
    if (d.first_step() >= d.step()) {
      std::printf("done in %s: nothing to train (already at step %lld of %lld) | val loss %.4f\n",
                  FormatDuration(total).c_str(), static_cast<long long>(d.first_step()),
                  static_cast<long long>(d.step()), d.val_loss());
    } else {
      const std::string steps = d.first_step() > 0
                                    ? "steps " + std::to_string(d.first_step() + 1) + "-" +
                                          std::to_string(d.step()) + " (resumed at step " +
                                          std::to_string(d.first_step()) + ")"
                                    : std::to_string(d.step()) + " steps";
      std::printf("done in %s: %s | train loss %.4f | val loss %.4f | %.0f tok/s\n",
                  FormatDuration(total).c_str(), steps.c_str(), d.train_loss(), d.val_loss(),
                  d.tokens_per_s());
    }
    if (!d.sample().empty()) std::printf("--- sample ---\n%s\n---\n", d.sample().c_str());
    if (!d.checkpoint().empty()) std::printf("checkpoints: %s\n", d.checkpoint().c_str());
  }
  return Status::Ok();
}

// 128 + the signal for a run stopped by one (130 for Ctrl-C, 143 for SIGTERM); 0 otherwise.
int InterruptedExit(const Status& st) {
  int sig = 0;
  if (std::sscanf(st.message().c_str(), "interrupted by signal %d", &sig) == 1) return 128 + sig;
  return 0;
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
  cmd->add_option("--advertise", o->advertise,
                  "Address workers connect to (default: --address, or this host's name for "
                  "0.0.0.0)");
  cmd->add_option("--token", o->token, "Job token (default: random)");
  cmd->add_option("--threads", o->threads, "Threads per worker (default: cores / ranks)")
      ->check(PositiveInteger());
  cmd->add_option("--heartbeat-ms", o->heartbeat_ms, "Worker heartbeat period")
      ->check(CLI::Range(100, 600000));
  cmd->add_option("--silence-s", o->silence_s, "A worker not heard from this long is declared lost")
      ->check(CLI::Range(1.0, 86400.0));
  AddJobOverrideOptions(cmd, &o->overrides);  // as `loom train` takes them
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
    int stopped_by = 0;
    Status st =
        kind.ok() ? RunLaunch(*o, *kind, &stopped_by) : kind.status().WithContext("--launcher");
    *exit_code = st.ok()               ? StopExitCode(stopped_by)  // as loom train
                 : InterruptedExit(st) ? InterruptedExit(st)
                                       : ReportError("launch", st);
  });
}

void AddCoordinatorCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<LaunchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "coordinator", "Run the coordinator service for workers started elsewhere (srun, by hand)");
  AddOptions(cmd, o.get());
  cmd->callback([o, exit_code] {
    int stopped_by = 0;
    Status st = RunLaunch(*o, LauncherKind::kNone, &stopped_by);
    *exit_code = st.ok()               ? StopExitCode(stopped_by)
                 : InterruptedExit(st) ? InterruptedExit(st)
                                       : ReportError("coordinator", st);
  });
}

}  // namespace loom
