// `loom launch JOB [--cluster C]`: plan, coordinate and run a job end to end. The coordinator
// runs in this process: it chooses the layout (the job's `parallel:` section, completed by the
// planner), serves the workers (docs/COORDINATOR.md), starts them through the launcher (mpirun
// on this machine by default; inside a Slurm allocation srun, on the allocation's nodes and
// tasks; or none), shows one live progress line, and returns 0 only when every rank finished
// training. On Ctrl-C, a worker failure or a worker that falls silent it stops every worker and
// says what happened. What to do when is the supervisor's decision
// (coordinator/supervisor/supervisor.h); this file is its driver: it checks and plans, starts the
// service and the workers, observes, carries out the actions and prints.
//
// `loom coordinator JOB --np N` is the same service without a launcher: it prints how to start
// the workers and waits for them.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "checkpoint/format.h"
#include "checkpoint/metadata_specs.h"
#include "cli/commands.h"
#include "cli/launch_calibration.h"
#include "cli/train_run.h"
#include "cli/validators.h"
#include "coordinator/metrics/metrics_service.h"
#include "coordinator/restart_plan.h"
#include "coordinator/service/launch_plan.h"
#include "coordinator/service/launcher.h"
#include "coordinator/service/service.h"
#include "coordinator/slurm_env.h"
#include "coordinator/snapshot_plan.h"
#include "coordinator/supervisor/anomaly_watch.h"
#include "coordinator/supervisor/post_mortem.h"
#include "coordinator/supervisor/supervisor.h"
#include "core/logging.h"
#include "core/progress_line.h"
#include "core/signals.h"
#include "core/stop_signal.h"
#include "fault/snapshot/segment.h"
#include "job/job_config.h"
#include "job/job_overrides.h"
#include "worker/checkpointer.h"

namespace loom {
namespace {

// "44 min", "3.2 h", "5 days".
std::string AgeText(double seconds) {
  char text[32];
  if (seconds < 3600) {
    std::snprintf(text, sizeof(text), "%.0f min", seconds / 60);
  } else if (seconds < 48 * 3600) {
    std::snprintf(text, sizeof(text), "%.1f h", seconds / 3600);
  } else {
    std::snprintf(text, sizeof(text), "%.0f days", seconds / 86400);
  }
  return text;
}

struct LaunchOptions {
  std::string job, cluster, calibration, launcher, address = "127.0.0.1", advertise, token;
  int np = 0, port = 0, threads = 0;
  int heartbeat_ms = 2000;
  double silence_s = 60;  // a rank not heard from this long is declared lost
  // The job's metrics section, overridden (-1 / "": as the job says).
  int metrics_port = -1;
  std::string metrics_address, run_dir;
  // The job's settings `loom train` also takes as flags (AddJobOverrideOptions).
  JobOverrides overrides;
};

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

// How a launch ended, for the exit code (an error is returned as a Status instead).
struct LaunchOutcome {
  int stopped_by = 0;      // every rank saved and stopped on this signal (or the time limit)
  int interrupted_by = 0;  // this process was interrupted by this signal: exit 128 + it
};

// The job as checked and planned, before anything starts (and again for each restart).
struct PlannedLaunch {
  JobConfig job;  // as given, with the command-line overrides
  LaunchPlan plan;
  int world = 0;
  Cluster cluster;  // as planned on: lost nodes excluded, spares in use no longer spare
  Calibration calibration;
  std::string job_key;  // names the job's shared memory, the same in every incarnation
  std::vector<proto::SnapshotOrigin> history;  // earlier incarnations, newest first
};

// Whether every node of `hosts` is this host (logical nodes on one machine, or localhost).
bool AllOnThisHost(const std::vector<std::string>& hosts) {
  char self[256] = {};
  ::gethostname(self, sizeof(self) - 1);
  return std::all_of(hosts.begin(), hosts.end(), [&](const std::string& h) {
    return h == "localhost" || h == "127.0.0.1" || h == self;
  });
}

// The job's in-memory snapshot plan for `l` (when it takes snapshots), and, on this host, a
// marker per node by which a lost logical node is told from a crashed worker.
Status PlanLaunchSnapshots(PlannedLaunch* l) {
  l->plan.spec.snapshot.reset();
  if (!l->job.snapshot.enabled) return Status::Ok();
  std::string note;
  Result<proto::SnapshotPlan> planned =
      PlanSnapshots(l->job.snapshot, l->cluster, l->plan.spec.node, l->job_key, l->job.path, &note);
  if (!planned.ok() && !l->history.empty()) {
    // The job's code does not fit the nodes left after a loss: the default for them does.
    SnapshotConfig fallback = l->job.snapshot;
    fallback.k.reset();
    fallback.m.reset();
    note = ForUser(planned.status(), LogSubsys::COORD) + "; using the default for the nodes left";
    planned =
        PlanSnapshots(fallback, l->cluster, l->plan.spec.node, l->job_key, l->job.path, nullptr);
  }
  LOOM_ASSIGN_OR_RETURN(proto::SnapshotPlan sp, std::move(planned));
  if (!note.empty()) std::printf("  snapshots: %s\n", note.c_str());
  if (!l->history.empty()) {
    proto::SnapshotRecovery* rec = sp.mutable_recovery();
    for (const proto::SnapshotOrigin& o : l->history) *rec->add_origins() = o;
  }
  l->plan.spec.snapshot = std::move(sp);
  if (AllOnThisHost(l->plan.hosts)) {
    for (const std::string& node : l->plan.spec.snapshot->rank_node()) {
      LOOM_RETURN_IF_ERROR(CreateNodeMarker(l->job_key, node));
    }
  }
  return Status::Ok();
}

// What the next incarnation needs to know of `l` to restore its snapshots.
proto::SnapshotOrigin OriginOf(const PlannedLaunch& l) {
  proto::SnapshotOrigin o;
  const proto::SnapshotPlan& sp = *l.plan.spec.snapshot;
  o.set_epoch(l.plan.spec.epoch);
  SetLayoutSpec(l.plan.spec.layout, o.mutable_layout());
  *o.mutable_rank_node() = sp.rank_node();
  *o.mutable_groups() = sp.groups();
  o.set_k(sp.k());
  o.set_m(sp.m());
  return o;
}

// The rest of a planned launch: what workers record and how they talk to the coordinator, the
// job as every worker will parse it checked here first.
Status Complete(const LaunchOptions& o, PlannedLaunch* l) {
  LaunchPlan& plan = l->plan;
  if (l->job.text.size() <= kMaxRecordedJobBytes) plan.spec.job_file_text = l->job.text;
  plan.spec.override_args = l->job.overrides;
  Result<JobConfig> planned = ParseJobConfig(plan.spec.job_yaml, plan.spec.job_path);
  if (!planned.ok()) return planned.status().WithContext("the planned job");
  plan.spec.steps = planned->steps;
  plan.spec.token = o.token.empty() || plan.spec.epoch > 0 ? NewJobToken() : o.token;
  plan.spec.heartbeat_ms = o.heartbeat_ms;
  // The anomaly detector needs the ranks' calls and frequent beats (docs/FAULTS.md).
  plan.spec.detect = l->job.detect.enabled;
  if (plan.spec.detect) {
    plan.spec.heartbeat_ms = std::min(o.heartbeat_ms, static_cast<int>(l->job.detect.beat_ms));
  }
  l->world = plan.spec.layout.world();
  return Status::Ok();
}

// The cluster to plan on and the ranks to launch (0: every device of it): --cluster; else,
// inside a Slurm allocation, its nodes with a device per task (coordinator/slurm_env.h); else
// this machine with --np ranks.
Result<Cluster> ClusterOf(const LaunchOptions& o, const std::optional<SlurmAllocation>& slurm,
                          int* world) {
  *world = o.np;
  if (!o.cluster.empty()) return LoadCluster(o.cluster);
  if (!slurm) return LocalhostCluster(o.np > 0 ? o.np : kLocalhostRanks);
  if (o.np > slurm->TotalTasks()) {
    return InvalidArgument("--np " + std::to_string(o.np) + ": " + DescribeSlurmJob(*slurm) +
                           " has " + std::to_string(slurm->TotalTasks()) +
                           " tasks (salloc/sbatch --ntasks)");
  }
  if (*world == 0) *world = slurm->TotalTasks();
  LOOM_ASSIGN_OR_RETURN(const Cluster cpu, LocalhostCluster(0));
  return SlurmCluster(*slurm, cpu);
}

// Everything is checked before anything starts: the job as the workers will read it, the
// manifest, the layout.
Result<PlannedLaunch> CheckAndPlan(const LaunchOptions& o,
                                   const std::optional<SlurmAllocation>& slurm) {
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
  PlannedLaunch l;
  int world = 0;
  LOOM_ASSIGN_OR_RETURN(l.cluster, ClusterOf(o, slurm, &world));
  std::string cal_path = o.calibration;
  if (!o.calibration.empty()) {
    LOOM_ASSIGN_OR_RETURN(l.calibration, LoadCalibration(o.calibration));
  } else if (o.cluster.empty() && !slurm) {
    // This machine on the built-in manifest: its own measurements (once, then cached).
    LOOM_ASSIGN_OR_RETURN(LocalCalibration local,
                          LocalhostCalibration(job, o.job, SelfPath(), world > 0 ? world : 4));
    if (local.calibration) {
      l.calibration = *local.calibration;
      cal_path = local.path;
      // A cached one can be hours old: this VM's speed drifted 0.57x in four hours
      // (docs/BENCHMARKS.md), so its age is part of what the prediction rests on.
      std::printf("loom launch: calibration %s (%s)\n", local.path.c_str(),
                  local.from_env   ? "LOOM_CALIBRATION"
                  : local.measured ? "measured now"
                                   : ("measured " + AgeText(local.age_s) +
                                      " ago, cached; delete it to measure again")
                                         .c_str());
    }
  }
  if (const std::string note = CalibrationPrecisionNote(l.calibration, job.precision);
      !note.empty()) {
    std::printf("loom launch: calibration %s: %s\n", cal_path.c_str(), note.c_str());
  }
  LOOM_ASSIGN_OR_RETURN(l.plan, PlanLaunch(job, o.overrides, l.cluster, l.calibration, world));
  l.job = std::move(job);
  LOOM_RETURN_IF_ERROR(Complete(o, &l));
  l.job_key = l.plan.spec.token.substr(0, 12);
  return l;
}

// The nodes of `l` found lost: on this host, those whose marker is gone (dropped logical nodes);
// elsewhere none can be told yet (a worker that cannot start there fails the next incarnation).
std::vector<int> LostNodes(const PlannedLaunch& l) {
  std::vector<int> lost;
  if (!l.plan.spec.snapshot || !AllOnThisHost(l.plan.hosts)) return lost;
  std::vector<bool> used(l.cluster.nodes.size(), false);
  for (int n : l.plan.spec.node) used[static_cast<size_t>(n)] = true;
  for (size_t n = 0; n < used.size(); ++n) {
    if (used[n] && !NodeMarkerExists(l.job_key, l.cluster.nodes[n].name)) {
      lost.push_back(static_cast<int>(n));
    }
  }
  return lost;
}

// The next incarnation of `prev` after a failure: on the same nodes, with spares for lost ones,
// or replanned on the survivors (coordinator/restart_plan.h), restoring prev's snapshots.
Result<PlannedLaunch> PlanRestart(const LaunchOptions& o, const PlannedLaunch& prev,
                                  const std::vector<int>& lost, const std::string& reason) {
  std::vector<int> ranks_on(prev.cluster.nodes.size(), 0);
  for (int n : prev.plan.spec.node) ++ranks_on[static_cast<size_t>(n)];
  LOOM_ASSIGN_OR_RETURN(RestartPlacement rp, PlaceRestart(prev.cluster, ranks_on, lost));
  PlannedLaunch next;
  next.job = prev.job;
  next.cluster = rp.cluster;
  next.calibration = prev.calibration;
  next.job_key = prev.job_key;
  next.history = prev.history;
  next.history.insert(next.history.begin(), OriginOf(prev));
  if (rp.kind != RestartPlacement::Kind::kReplan) {
    next.plan = prev.plan;
    for (int& n : next.plan.spec.node) n = rp.node_map[static_cast<size_t>(n)];
    SetHosts(next.cluster, &next.plan);
  } else {
    Result<LaunchPlan> p = PlanLaunch(next.job, o.overrides, next.cluster, next.calibration, 0);
    if (!p.ok() && next.job.parallel.present) {
      // The job's own layout does not fit the survivors: the planner chooses all of it.
      std::printf(
          "loom launch: the job's parallel section does not fit the surviving nodes "
          "(%s): the planner chooses the layout\n",
          ForUser(p.status(), LogSubsys::COORD).c_str());
      ParallelConfig& pc = next.job.parallel;
      pc.tp = pc.cp = pc.pp = pc.vpp = pc.dp = pc.zero = std::nullopt;
      pc.sp = std::nullopt;
      p = PlanLaunch(next.job, o.overrides, next.cluster, next.calibration, 0);
    }
    if (!p.ok()) return p.status().WithContext("replanning on the surviving nodes");
    next.plan = std::move(*p);
  }
  next.plan.spec.epoch = prev.plan.spec.epoch + 1;
  LOOM_RETURN_IF_ERROR(Complete(o, &next));
  LOOM_RETURN_IF_ERROR(PlanLaunchSnapshots(&next));
  proto::SnapshotRecovery* rec = next.plan.spec.snapshot->mutable_recovery();
  rec->set_reason(reason);
  for (int n : lost) rec->add_lost_nodes(prev.cluster.nodes[static_cast<size_t>(n)].name);
  std::printf("loom launch: restart %d: %s, layout %s\n", next.plan.spec.epoch, rp.summary.c_str(),
              next.plan.spec.layout.ToString().c_str());
  std::fflush(stdout);
  return next;
}

// What workers connect to: the listen address unless it is a wildcard.
Result<std::string> AdvertisedAddress(const LaunchOptions& o, const LaunchPlan& plan) {
  std::string advertise = o.advertise;
  if (advertise.empty()) {
    advertise = o.address;
    if (advertise == "0.0.0.0") {
      char host[256] = {};
      ::gethostname(host, sizeof(host) - 1);
      advertise = host;
    }
  }
  if (!AllOnThisHost(plan.hosts) && (advertise == "127.0.0.1" || advertise == "localhost")) {
    return InvalidArgument("the plan spans " + std::to_string(plan.hosts.size()) +
                           " nodes: --address must be one the other nodes can reach (e.g. "
                           "0.0.0.0) and --advertise this host's name on their network");
  }
  return advertise;
}

// Serves the workers; prints what runs where (and in which Slurm job, requeued how often).
// Returns the service, listening.
Result<std::unique_ptr<CoordinatorService>> StartService(
    const LaunchOptions& o, LauncherKind kind, const PlannedLaunch& l,
    const std::optional<SlurmAllocation>& slurm, JobState* state, std::string* endpoint) {
  ServiceOptions so;
  so.address = o.address;
  so.port = o.port;
  so.idle_timeout_ms = static_cast<int>(o.silence_s * 1000);
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorService> service,
                        CoordinatorService::Start(state, so));
  LOOM_ASSIGN_OR_RETURN(const std::string advertise, AdvertisedAddress(o, l.plan));
  *endpoint = advertise + ":" + std::to_string(service->port());
  const std::string where = slurm ? " | " + DescribeSlurmJob(*slurm) : "";
  std::printf("loom %s: %s | %d ranks via %s%s | layout %s (%s)\n",
              kind == LauncherKind::kNone ? "coordinator" : "launch", o.job.c_str(), l.world,
              LauncherName(kind), where.c_str(), l.plan.spec.layout.ToString().c_str(),
              l.plan.how.c_str());
  if (!l.plan.prediction.empty()) std::printf("  %s\n", l.plan.prediction.c_str());
  std::printf("  coordinator at %s\n", endpoint->c_str());
  std::fflush(stdout);
  return service;
}

// Serves the job's metrics and status page and keeps its series, as the job's `metrics:` section
// and the flags say (null when metrics.enabled is false).
Result<std::unique_ptr<MetricsService>> StartMetrics(const LaunchOptions& o,
                                                     const PlannedLaunch& l) {
  const MetricsConfig& m = l.job.metrics;
  if (!m.enabled) return std::unique_ptr<MetricsService>();
  MetricsServiceOptions mo;
  mo.address = o.metrics_address.empty() ? m.address : o.metrics_address;
  mo.port = o.metrics_port >= 0 ? o.metrics_port : static_cast<int>(m.port);
  mo.run_dir = !o.run_dir.empty()   ? o.run_dir
               : !m.run_dir.empty() ? m.run_dir
                                    : l.job.checkpoint.dir;
  Result<std::unique_ptr<MetricsService>> s = MetricsService::Start(mo);
  if (!s.ok()) return s.status().WithContext("metrics (set metrics.port, or --metrics-port)");
  const std::string url = (*s)->url();
  std::printf("  metrics at %s/metrics | status page %s/%s%s\n", url.c_str(), url.c_str(),
              (*s)->series_path().empty() ? "" : " | series in ", (*s)->series_path().c_str());
  std::fflush(stdout);
  return s;
}

// Tells `metrics` (may be null) the plan of the incarnation `l`.
void ShowPlan(MetricsService* metrics, const LaunchOptions& o, const PlannedLaunch& l, double now) {
  if (metrics == nullptr) return;
  std::vector<std::string> names, hosts;
  for (const Node& n : l.cluster.nodes) {
    names.push_back(n.name);
    hosts.push_back(n.host);
  }
  metrics->SetPlan(PlanRecordOf(l.plan.spec, names, hosts, o.job, now), l.plan.spec.flops_per_step,
                   l.plan.spec.peak_flops);
}

// How a supervision's end reads in the run's events.
const char* EndEventOf(ActionKind kind) {
  switch (kind) {
    case ActionKind::kFinish:
      return "finished";
    case ActionKind::kStopped:
      return "stopped";
    case ActionKind::kInterrupt:
      return "interrupted";
    default:
      return "failed";
  }
}

// The workers' launcher when this process started one (none: they are started elsewhere).
class Workers {
 public:
  Workers() = default;
  explicit Workers(WorkerProcesses p) : p_(std::move(p)) {}

  bool started() const { return p_.has_value(); }
  bool Exited(int* status) { return p_ && p_->Exited(status); }
  void Signal(int sig) {
    if (p_) p_->Signal(sig);
  }

  // Stops the launcher, then kills any worker of this host it left behind (mpirun gives its
  // ranks process groups of their own).
  void Stop(const JobState& state) {
    if (!p_) return;
    p_->Stop(5000);
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    std::vector<pid_t> killed;
    for (const RankStatus& r : state.Ranks()) {
      if (r.registered && r.pid > 0 && r.host == host && Running(static_cast<pid_t>(r.pid))) {
        ::kill(r.pid, SIGKILL);
        killed.push_back(static_cast<pid_t>(r.pid));
      }
    }
    // Gone before the closing lines say "the same command resumes": a rerun must not find rank
    // 0 still holding the checkpoint directory's lock. Bounded: a process stuck in the kernel
    // (an NFS write) may take longer, and the rerun then waits for the lock itself.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until &&
           std::any_of(killed.begin(), killed.end(), Running)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  std::optional<WorkerProcesses> p_;
};

// Starts the workers through the launcher, or says how to start them (kNone). `hostfile` must
// outlive the launch.
Result<Workers> StartWorkers(const LaunchOptions& o, LauncherKind kind, const PlannedLaunch& l,
                             const std::string& endpoint, TempFile* hostfile) {
  LaunchCommand cmd;
  cmd.kind = kind;
  cmd.world = l.world;
  cmd.loom = SelfPath();
  cmd.threads = o.threads;
  cmd.as_root = ::geteuid() == 0;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (!std::all_of(l.plan.hosts.begin(), l.plan.hosts.end(),
                   [&](const std::string& h) { return h == l.plan.hosts[0]; })) {
    if (hostfile->path.empty()) {
      LOOM_ASSIGN_OR_RETURN(hostfile->path, MakeTempFile("loom-hostfile"));
    }
    cmd.hostfile = hostfile->path;
    LOOM_RETURN_IF_ERROR(WriteHostfile(cmd.hostfile, l.plan.hosts, l.plan.slots));
  } else {
    cmd.oversubscribe = l.world > static_cast<int>(cores);
  }
  if (kind == LauncherKind::kNone) {
    std::printf(
        "  start %d workers, e.g.: LOOM_COORDINATOR=%s LOOM_JOB_TOKEN=%s mpirun -np %d "
        "%s worker\n",
        l.world, endpoint.c_str(), l.plan.spec.token.c_str(), l.world, cmd.loom.c_str());
    std::fflush(stdout);
    return Workers();
  }
  if (kind == LauncherKind::kSrun && std::getenv("SLURM_JOB_ID") == nullptr) {
    return FailedPrecondition(
        "--launcher srun: run loom launch inside a Slurm allocation "
        "(salloc or sbatch)");
  }
  LOOM_ASSIGN_OR_RETURN(
      WorkerProcesses p,
      WorkerProcesses::Start(LauncherArgv(cmd), {"LOOM_COORDINATOR=" + endpoint,
                                                 "LOOM_JOB_TOKEN=" + l.plan.spec.token}));
  return Workers(std::move(p));
}

// The live progress line from the complete steps (core/progress_line.h).
// A restart in progress, for the line that says how it went.
struct Recovering {
  int restart = 0;
  double failed_at = 0;   // service time of the failure
  int64_t last_step = 0;  // the last step complete before it
};

class Monitor {
 public:
  Monitor(const JobState& job, int log_every, std::optional<Recovering> recovering,
          const CoordinatorService& service, MetricsService* metrics)
      : job_(job),
        service_(service),
        metrics_(metrics),
        recovering_(recovering),
        line_({.in_place = StdoutUpdatesInPlace(/*one_process=*/true),
               .log_every = log_every,
               .steps = job.spec().steps}) {}

  // `final`: the last line (printed unless this step's line already was).
  void Update(bool final) {
    const Progress p = job_.GetProgress();
    if (recovering_ && p.step > 0) Recovered(p);
    if (job_.spec().snapshot) {
      line_.Show(p.step, final,
                 "loss %.4f | %7.0f tok/s | MFU %5.2f%% | %7.1f ms/step | ETA %s | snapshot %lld "
                 "(%.1f MB/rank)",
                 p.loss, p.tokens_per_s, 100 * p.mfu, p.step_s * 1e3,
                 FormatDuration(p.eta_s).c_str(), static_cast<long long>(p.snapshot_step),
                 static_cast<double>(p.snapshot_bytes) / 1e6);
      return;
    }
    line_.Show(p.step, final, "loss %.4f | %7.0f tok/s | MFU %5.2f%% | %7.1f ms/step | ETA %s",
               p.loss, p.tokens_per_s, 100 * p.mfu, p.step_s * 1e3,
               FormatDuration(p.eta_s).c_str());
  }

 private:
  // The first step after a restart: where it restored from, what was recomputed, how long the
  // job was down.
  void Recovered(const Progress& p) {
    const Recovering r = *recovering_;
    recovering_.reset();
    // The snapshot can be of a later step than the last the coordinator heard of, and that step
    // had completed too: the ranks report a step after finishing it (a rank that died takes its
    // unsent reports with it), and the stopped incarnation may still finish steps while it is
    // being stopped (mpirun continues a frozen rank to deliver the SIGTERM; measured: up to 5
    // more steps and their snapshots on this VM).
    const int64_t completed = std::max(r.last_step, p.restored_step);
    const int64_t lost = completed - p.restored_step;
    std::printf(
        "\nloom launch: restart %d recovered from %s | %lld step%s recomputed (step %lld had "
        "completed) | training again %.1f s after the failure (restore %.2f s)\n",
        r.restart, p.restored_from.empty() ? "a fresh start" : p.restored_from.c_str(),
        static_cast<long long>(lost), lost == 1 ? "" : "s", static_cast<long long>(completed),
        service_.Now() - r.failed_at, p.restore_s);
    std::fflush(stdout);
    if (metrics_ != nullptr) {
      metrics_->Recovered(lost);
      metrics_->Event("recovered",
                      "restart " + std::to_string(r.restart) + " recovered from " +
                          (p.restored_from.empty() ? "a fresh start" : p.restored_from) + "; " +
                          std::to_string(lost) + " steps recomputed",
                      p.step, service_.Now());
    }
  }

  const JobState& job_;
  const CoordinatorService& service_;
  MetricsService* metrics_;
  std::optional<Recovering> recovering_;
  ProgressLine line_;
};

SupervisorConfig SupervisionOf(const LaunchOptions& o, LauncherKind kind, const PlannedLaunch& l,
                               int restarts_left) {
  const CheckpointConfig& c = l.job.checkpoint;
  SupervisorConfig s;
  s.world = l.world;
  s.launcher = kind == LauncherKind::kNone ? "" : LauncherName(kind);
  // The job's checkpoint.signal (preemption: a scheduler may send it to this process, e.g.
  // `sbatch --signal=B:USR1@120`) is passed on to the workers, which save and stop; a second
  // one, or any other signal, stops them at once.
  s.stop_signal = c.dir.empty() ? 0 : c.stop_signal;
  s.silence_s = o.silence_s;
  s.predicted_step_s = l.plan.spec.predicted_step_s;
  s.checkpoint_io_s = static_cast<double>(CheckpointTimeoutMs()) / 1000;
  s.loads_checkpoint = !(c.dir.empty() && c.load.empty() && c.init_from.empty()) ||
                       l.plan.spec.epoch > 0;  // a restart restores first
  s.restarts_left = kind == LauncherKind::kNone ? 0 : restarts_left;
  s.restoring = l.plan.spec.epoch > 0;
  if (l.plan.spec.detect) s.detect_action = l.job.detect.action;
  std::vector<int> nodes = l.plan.spec.node;
  std::sort(nodes.begin(), nodes.end());
  s.nodes_in_use = static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
  return s;
}

// The detector for one incarnation of `l` (none when the job turns it off).
std::optional<AnomalyWatch> WatchOf(const PlannedLaunch& l) {
  if (!l.plan.spec.detect) return std::nullopt;
  std::vector<std::string> names;
  for (const Node& n : l.cluster.nodes) names.push_back(n.name);
  detect::DetectorConfig c = DetectorConfigFor(l.plan.spec.layout, l.plan.spec.node, names);
  const DetectConfig& d = l.job.detect;
  c.slow_rank_score = d.slow_rank_score;
  c.slow_link_factor = d.slow_link_factor;
  c.persist = static_cast<int>(d.persist);
  c.hang_min_s = d.hang_s;
  c.stale_s = d.stale_s;
  return AnomalyWatch(std::move(c));
}

// Where an incarnation's post-mortem goes: detect.trace_dir, else <checkpoint.dir>/trace; "" for
// none. One directory per incarnation.
std::string TraceDirOf(const PlannedLaunch& l) {
  std::string dir = l.job.detect.trace_dir;
  if (dir.empty() && !l.job.checkpoint.dir.empty()) dir = JoinPath(l.job.checkpoint.dir, "trace");
  if (dir.empty()) return "";
  return JoinPath(dir, "epoch_" + std::to_string(l.plan.spec.epoch));
}

// Writes the post-mortem of an incarnation that ended as `end` (best effort: a failure to write
// it is reported, not added to the job's).
void WritePostMortemOf(const PlannedLaunch& l, const JobState& state, const AnomalyWatch* watch,
                       const Action& end, double now) {
  const std::string dir = TraceDirOf(l);
  if (dir.empty()) return;
  // A restart that isolates a node came from the detector's verdict.
  const std::string verdict = end.isolate_node >= 0 ? end.status.message() : "";
  const PostMortem pm =
      CollectPostMortem(state, l.plan.spec.epoch, watch ? &watch->detector().config() : nullptr,
                        end.status.message(), verdict, now);
  const Status st = WritePostMortem(dir, pm);
  if (!st.ok()) {
    std::printf("loom launch: could not write the post-mortem: %s\n", st.message().c_str());
  } else {
    std::printf("loom launch: post-mortem in %s (loom trace show %s)\n", dir.c_str(), dir.c_str());
  }
  std::fflush(stdout);
}

// The supervision loop: observes every 250 ms (at once on a signal), carries out the
// supervisor's actions and shows progress; returns the action that ended it.
Action Supervise(Supervisor* supervisor, SignalWaiter* signals, const JobState& state,
                 const CoordinatorService& service, Workers* workers, Monitor* monitor,
                 AnomalyWatch* watch, MetricsService* metrics) {
  for (;;) {
    Observation ob;
    ob.signal = signals->Wait(std::chrono::steady_clock::now() + std::chrono::milliseconds(250));
    int status = 0;
    if (workers->Exited(&status)) ob.launcher_exit = status;
    ob.job = state.Snapshot();  // after the exit: every Done has arrived
    ob.now = service.Now();
    if (watch != nullptr) ob.anomalies = watch->Observe(state, ob.now);
    if (metrics != nullptr) {
      static const std::vector<double> kNoScores;
      metrics->Observe(state, watch != nullptr ? watch->detector().scores() : kNoScores, ob.now);
      for (const detect::Verdict& v : ob.anomalies) {
        metrics->Event(detect::AnomalyKindName(v.kind), v.line, v.step, ob.now);
      }
    }
    for (Action& a : supervisor->Observe(ob)) {
      if (a.kind == ActionKind::kAnomaly) {
        monitor->Update(false);
        std::printf("\nloom launch: %s (step %lld)\n", a.status.message().c_str(),
                    static_cast<long long>(a.step));
        std::fflush(stdout);
      } else if (a.kind == ActionKind::kAnnounceStop) {
        std::printf("\nloom launch: %s: the workers save the step they are at and stop%s\n",
                    StopSignalName(a.signal).c_str(),
                    workers->started() ? "" : " (their launcher passes the signal on)");
        std::fflush(stdout);
      } else if (a.kind == ActionKind::kPassStopSignal) {
        workers->Signal(a.signal);
      } else {
        if (a.kind != ActionKind::kInterrupt) monitor->Update(false);
        return std::move(a);
      }
    }
    monitor->Update(false);
  }
}

// Ctrl-C or another signal: the workers are stopped at once, and what a rerun resumes named.
void Interrupt(int sig, const PlannedLaunch& l, const JobState& state, Workers* workers) {
  if (workers->started()) {
    std::printf("\nloom launch: interrupted (%s): stopping %d workers now\n", strsignal(sig),
                l.world);
    std::fflush(stdout);
    workers->Stop(state);
    // Named once they are gone: until then they may commit (and retention delete) more.
    std::printf("loom launch: workers stopped; %s\n", DescribeRestart(l.job).c_str());
  } else {  // started by somebody else: they stop when they lose the coordinator
    std::printf(
        "\nloom launch: interrupted (%s): the %d workers started elsewhere stop when they "
        "lose the coordinator; so far %s\n",
        strsignal(sig), l.world, DescribeRestart(l.job).c_str());
  }
  std::fflush(stdout);
}

void PrintRejected(const ServiceStats& st) {
  const int64_t rejected =
      st.rejected_token + st.rejected_malformed + st.rejected_oversized + st.rejected_protocol;
  if (rejected == 0) return;
  std::printf(
      "coordinator: rejected %lld connection(s) (wrong token %lld, malformed %lld, "
      "oversized %lld, protocol %lld)\n",
      static_cast<long long>(rejected), static_cast<long long>(st.rejected_token),
      static_cast<long long>(st.rejected_malformed), static_cast<long long>(st.rejected_oversized),
      static_cast<long long>(st.rejected_protocol));
}

// The closing lines of a job that finished: the steps it trained, the losses, the sample.
void PrintDone(const Progress& p, double total_s) {
  if (!p.final) return;
  const proto::Done& d = *p.final;
  const std::string took = FormatDuration(total_s);
  if (d.first_step() >= d.step()) {
    std::printf("done in %s: nothing to train (already at step %lld of %lld) | val loss %.4f\n",
                took.c_str(), static_cast<long long>(d.first_step()),
                static_cast<long long>(d.step()), d.val_loss());
  } else {
    const std::string steps = d.first_step() > 0
                                  ? "steps " + std::to_string(d.first_step() + 1) + "-" +
                                        std::to_string(d.step()) + " (resumed at step " +
                                        std::to_string(d.first_step()) + ")"
                                  : std::to_string(d.step()) + " steps";
    std::printf("done in %s: %s | train loss %.4f | val loss %.4f | %.0f tok/s\n", took.c_str(),
                steps.c_str(), d.train_loss(), d.val_loss(), d.tokens_per_s());
  }
  if (!d.sample().empty()) std::printf("--- sample ---\n%s\n---\n", d.sample().c_str());
  if (!d.checkpoint().empty()) std::printf("checkpoints: %s\n", d.checkpoint().c_str());
}

// Carries out the action that ended the supervision and says how the job ended.
Status Report(const Action& end, const PlannedLaunch& l, const JobState& state,
              const CoordinatorService& service, double total_s, Workers* workers, Monitor* monitor,
              LaunchOutcome* outcome) {
  if (end.kind == ActionKind::kInterrupt) {
    Interrupt(end.signal, l, state, workers);
    outcome->interrupted_by = end.signal;
    return Status::Ok();
  }
  Status result;
  if (end.kind == ActionKind::kFail) workers->Stop(state);
  monitor->Update(true);
  if (end.kind == ActionKind::kFail) {  // the workers are stopped: what a rerun resumes
    result = Status(end.status.code(), end.status.message() + "\n  " + DescribeRestart(l.job));
  }
  PrintRejected(service.stats());
  LOOM_RETURN_IF_ERROR(result);
  if (end.kind == ActionKind::kStopped) {
    outcome->stopped_by = end.signal;
    std::printf(
        "stopped after step %lld of %lld in %s on %s (all %d ranks): saved %s; the same command "
        "resumes it\n",
        static_cast<long long>(end.step), static_cast<long long>(l.job.steps),
        FormatDuration(total_s).c_str(), StopSignalName(end.signal).c_str(), l.world,
        JoinPath(l.job.checkpoint.dir, StepDirName(end.step)).c_str());
    return Status::Ok();
  }
  PrintDone(state.GetProgress(), total_s);
  return Status::Ok();
}

// How the workers start: `loom coordinator` starts none; `loom launch` as --launcher says, else
// as the job's `launcher:` says, else with srun inside a Slurm allocation (it starts the tasks
// where Slurm placed them, and Slurm tracks and signals them), else with mpirun.
Result<LauncherKind> LauncherOf(const LaunchOptions& o, bool coordinator_only, const JobConfig& job,
                                bool in_slurm) {
  if (coordinator_only) return LauncherKind::kNone;
  if (!o.launcher.empty()) return ParseLauncher(o.launcher);  // checked before the job was read
  if (!job.launcher.empty()) return ParseLauncher(job.launcher);
  return in_slurm ? LauncherKind::kSrun : LauncherKind::kMpirun;
}

Status RunLaunch(const LaunchOptions& o, bool coordinator_only, LaunchOutcome* outcome) {
  if (!coordinator_only && !o.launcher.empty()) {  // a bad flag is named before the job is read
    LOOM_RETURN_IF_ERROR(ParseLauncher(o.launcher).status().WithContext("--launcher"));
  }
  LOOM_ASSIGN_OR_RETURN(const std::optional<SlurmAllocation> slurm,
                        ReadSlurmAllocation(std::getenv));
  LOOM_ASSIGN_OR_RETURN(PlannedLaunch l, CheckAndPlan(o, slurm));
  LOOM_ASSIGN_OR_RETURN(const LauncherKind kind,
                        LauncherOf(o, coordinator_only, l.job, slurm.has_value()));
  // Snapshots serve restarts, which only a launch that starts its workers can make.
  if (kind != LauncherKind::kNone) LOOM_RETURN_IF_ERROR(PlanLaunchSnapshots(&l));
  // Whatever happens from here, the job's shared memory on this host goes with the launch.
  struct ShmCleanup {
    std::string prefix;
    ~ShmCleanup() {
      if (!prefix.empty()) (void)RemoveSegments(prefix);
    }
  } cleanup{l.plan.spec.snapshot && AllOnThisHost(l.plan.hosts) ? JobSegmentPrefix(l.job_key) : ""};
  // A signal must never take the default action (kill this process and orphan the workers),
  // whichever thread it lands on — threads created before main (OpenBLAS) have nothing
  // blocked: the handler only records it and wakes the supervision loop (core/signals.h). One
  // ignored from the start is taken over too: the launcher decides what each one does.
  SignalWaiter signals(RecordSignals({SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2},
                                     OnRepeat::kRecordAgain, IfIgnored::kTakeOver));
  // A reader of its output that goes away (`loom launch job.yaml | head`) must not kill it
  // either: that left the workers running and the job's shared memory behind. Writes then fail
  // quietly and the job runs to its end; the workers start with SIGPIPE's default again
  // (coordinator/service/launcher.cc).
  ::signal(SIGPIPE, SIG_IGN);
  // Every incarnation's state (the service may still hold the previous one's while swapping).
  std::vector<std::unique_ptr<JobState>> states;
  states.push_back(std::make_unique<JobState>(l.plan.spec));
  std::string endpoint;
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CoordinatorService> service,
                        StartService(o, kind, l, slurm, states.back().get(), &endpoint));
  if (l.plan.spec.snapshot) {
    std::printf("  snapshots: %s\n", DescribeSnapshots(*l.plan.spec.snapshot).c_str());
    std::fflush(stdout);
  }
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<MetricsService> metrics, StartMetrics(o, l));
  ShowPlan(metrics.get(), o, l, service->Now());
  // The workers read the decay written out (job_rewrite.cc), so they cannot tell that --steps
  // ran past it: said here, once.
  const std::string past_decay = StepsPastDecayWarning(l.job, 0);
  if (!past_decay.empty()) {
    LOOM_LOG(WARN, TRAIN) << past_decay;
  }
  TempFile hostfile;
  LOOM_ASSIGN_OR_RETURN(Workers workers, StartWorkers(o, kind, l, endpoint, &hostfile));
  int restarts_left = l.plan.spec.snapshot ? static_cast<int>(l.job.snapshot.max_restarts) : 0;
  const double started = service->Now();
  std::optional<Recovering> recovering;
  for (;;) {
    JobState& state = *states.back();
    Supervisor supervisor(SupervisionOf(o, kind, l, restarts_left), service->Now());
    Monitor monitor(state, static_cast<int>(l.job.runtime.log_every), recovering, *service,
                    metrics.get());
    std::optional<AnomalyWatch> watch = WatchOf(l);
    const Action end = Supervise(&supervisor, &signals, state, *service, &workers, &monitor,
                                 watch ? &*watch : nullptr, metrics.get());
    if (end.kind == ActionKind::kFail || end.kind == ActionKind::kRestart) {
      WritePostMortemOf(l, state, watch ? &*watch : nullptr, end, service->Now());
    }
    if (end.kind != ActionKind::kRestart) {
      if (metrics) {
        metrics->Event(EndEventOf(end.kind),
                       end.kind == ActionKind::kFail ? end.status.message() : "",
                       state.GetProgress().step, service->Now());
      }
      return Report(end, l, state, *service, service->Now() - started, &workers, &monitor, outcome);
    }
    if (metrics) metrics->Event("restart", end.status.message(), end.step, service->Now());
    // The incarnation failed in a way a restart from the snapshots can mend.
    const int restart = static_cast<int>(l.job.snapshot.max_restarts) - restarts_left + 1;
    // (A detector's verdict was printed when it came.)
    if (end.isolate_node < 0) std::printf("\nloom launch: %s\n", end.status.message().c_str());
    std::printf(
        "  stopping the workers; restarting from the in-memory snapshots (restart %d of at most "
        "%lld)\n",
        restart, static_cast<long long>(l.job.snapshot.max_restarts));
    std::fflush(stdout);
    recovering = Recovering{restart, service->Now(), end.step};
    workers.Stop(state);
    std::vector<int> lost = LostNodes(l);
    if (end.isolate_node >= 0 &&
        std::find(lost.begin(), lost.end(), end.isolate_node) == lost.end()) {
      // Left out of the cluster from now on; its snapshots count as lost with it.
      const std::string& name = l.cluster.nodes[static_cast<size_t>(end.isolate_node)].name;
      std::printf("loom launch: isolating node %s\n", name.c_str());
      std::fflush(stdout);
      if (AllOnThisHost(l.plan.hosts)) (void)RemoveSegments(NodeSegmentPrefix(l.job_key, name));
      lost.push_back(end.isolate_node);
      std::sort(lost.begin(), lost.end());
    }
    LOOM_ASSIGN_OR_RETURN(l, PlanRestart(o, l, lost, end.status.message()));
    ShowPlan(metrics.get(), o, l, service->Now());
    states.push_back(std::make_unique<JobState>(l.plan.spec));
    service->SetJob(states.back().get());
    LOOM_ASSIGN_OR_RETURN(workers, StartWorkers(o, kind, l, endpoint, &hostfile));
    --restarts_left;
  }
}

// The exit code: 0, 128 + the signal a run stopped on after saving (75 for the time limit), as
// loom train; 128 + the signal that interrupted it (130 for Ctrl-C, 143 for SIGTERM); 1 for an
// error.
int ExitCode(const char* command, const Status& st, const LaunchOutcome& outcome) {
  if (!st.ok()) return ReportError(command, st);
  if (outcome.interrupted_by != 0) return 128 + outcome.interrupted_by;
  return StopExitCode(outcome.stopped_by);
}

void AddOptions(CLI::App* cmd, LaunchOptions* o) {
  cmd->add_option("job", o->job, "Job file (docs/JOB.md)")->required();
  cmd->add_option("--cluster", o->cluster,
                  "Cluster manifest (docs/MANIFESTS.md; default: the nodes of the Slurm "
                  "allocation it runs in, else this machine)");
  cmd->add_option("--calibration", o->calibration, "Calibration file from loom calibrate");
  cmd->add_option("--np", o->np,
                  "Ranks (default: 4 on this machine, every task of a Slurm allocation, every "
                  "device of a cluster)")
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
  cmd->add_option("--metrics-port", o->metrics_port,
                  "Port of /metrics and the status page (default: the job's metrics.port; 0: "
                  "any free port)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--metrics-address", o->metrics_address,
                  "Address /metrics and the status page listen on (default: the job's "
                  "metrics.address, 127.0.0.1)");
  cmd->add_option("--run-dir", o->run_dir,
                  "Where the run's series is kept for loom dashboard (default: the job's "
                  "metrics.run_dir, else checkpoint.dir)");
  AddJobOverrideOptions(cmd, &o->overrides);  // as `loom train` takes them
}

}  // namespace

void AddLaunchCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<LaunchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "launch", "Plan a job, start its workers and coordinate them until it finishes");
  AddOptions(cmd, o.get());
  cmd->add_option("--launcher", o->launcher,
                  "mpirun, srun or none (default: the job's `launcher:`, else srun inside a "
                  "Slurm allocation, else mpirun)");
  cmd->callback([o, exit_code] {
    LaunchOutcome outcome;
    const Status st = RunLaunch(*o, /*coordinator_only=*/false, &outcome);
    *exit_code = ExitCode("launch", st, outcome);
  });
}

void AddCoordinatorCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<LaunchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "coordinator", "Run the coordinator service for workers started elsewhere (srun, by hand)");
  AddOptions(cmd, o.get());
  cmd->callback([o, exit_code] {
    LaunchOutcome outcome;
    const Status st = RunLaunch(*o, /*coordinator_only=*/true, &outcome);
    *exit_code = ExitCode("coordinator", st, outcome);
  });
}

}  // namespace loom
