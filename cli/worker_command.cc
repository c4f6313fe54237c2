// `loom worker`: one rank of a job run by a coordinator (`loom launch`, or `loom coordinator`
// with workers started by srun or by hand). The worker registers, receives its plan (layout,
// coordinates, the job), trains it, reports every step (loss, step time, memory, a summary of its
// collectives) and how it finished. The coordinator's address and the job token come from
// --coordinator / --token or LOOM_COORDINATOR / LOOM_JOB_TOKEN (set by `loom launch`).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>

#include "checkpoint/format.h"
#include "cli/commands.h"
#include "cli/train_run.h"
#include "cli/validators.h"
#include "core/affinity.h"
#include "core/file_util.h"
#include "core/logging.h"
#include "core/stop_signal.h"
#include "core/utf8.h"
#include "fault/inject.h"
#include "job/job_overrides.h"
#include "worker/coordinator_client.h"
#include "worker/coordinator_reporter.h"

namespace loom {
namespace {

struct WorkerOptions {
  std::string coordinator, token;
  int threads = 0;
  int timeout_ms = 30000;
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// *stopped_by: the signal the run stopped on after saving (checkpoint.signal), else left 0.
Status RunWorker(const WorkerOptions& o, std::shared_ptr<Backend>* backend,
                 std::unique_ptr<CoordinatorClient>* client, int64_t* last_step, int* stopped_by) {
  const std::string endpoint = o.coordinator.empty() ? Env("LOOM_COORDINATOR") : o.coordinator;
  const std::string token = o.token.empty() ? Env("LOOM_JOB_TOKEN") : o.token;
  if (endpoint.empty()) {
    return InvalidArgument("--coordinator: expected host:port (or LOOM_COORDINATOR)");
  }
  if (token.empty()) return InvalidArgument("--token: expected the job token (or LOOM_JOB_TOKEN)");
  int world = 1, local = 1;
  LOOM_RETURN_IF_ERROR(StartMpi(false, backend, &world, &local));
  proto::RegisterRequest req;
  req.set_rank(*backend ? (*backend)->world_rank() : 0);
  req.set_world_size(world);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  req.set_host(host);
  req.set_pid(static_cast<int>(::getpid()));
  req.set_device("cpu");
  req.set_local_rank(std::atoi(Env("OMPI_COMM_WORLD_LOCAL_RANK").c_str()));
  LOOM_ASSIGN_OR_RETURN(*client, CoordinatorClient::Register(endpoint, token, req, o.timeout_ms));
  const proto::Plan& plan = (*client)->plan();
  // This rank's compute on its share of the host's cores (core/affinity.h): this thread trains,
  // and the compute threads it starts inherit the pinning.
  std::string cpus;
  if (plan.core_shares() > 1) {
    Result<std::vector<int>> pinned = PinToCoreShare(plan.core_share(), plan.core_shares());
    if (!pinned.ok()) {
      LOOM_LOG(WARN, COORD) << "computing on any core: " << pinned.status().message();
    } else if (!pinned->empty()) {
      cpus = CpuListString(*pinned);
      LOOM_LOG(DEBUG, COORD) << "core share " << plan.core_share() << " of " << plan.core_shares()
                             << ": CPUs " << cpus;
    }
  }
  LOOM_ASSIGN_OR_RETURN(JobConfig job, ParseJobConfig(plan.job_yaml(), plan.job_path()));
  // What checkpoints record: the job file and the flags the user gave, not the rewrite.
  if (!plan.job_file_text().empty()) job.text = plan.job_file_text();
  job.overrides.assign(plan.override_args().begin(), plan.override_args().end());
  for (const std::string& arg : plan.override_args()) {
    const std::string flag = arg.substr(0, arg.find(' '));
    if (!MarkSetByFlag(flag, &job)) {
      return InvalidArgument("plan from the coordinator: field 'override_args': unknown flag '" +
                             flag + "'");
    }
  }
  TrainOptions topt;
  topt.threads = o.threads;
  LOOM_RETURN_IF_ERROR(ApplyOverrides(topt, &job));
  if (*backend) (*client)->AttachTrace(&(*backend)->trace());
  CoordinatorReporter reporter(client->get(), req.rank(), backend->get());
  reporter.set_cpus(cpus);
  RunHooks hooks;
  if (plan.has_snapshot()) {
    hooks.snapshots = SnapshotSetup{plan.snapshot(), plan.epoch(), nullptr};
    const proto::SnapshotPlan& sp = plan.snapshot();
    const int r = req.rank();
    SetFaultIdentity(plan.epoch(), sp.job_key(), r < sp.rank_node_size() ? sp.rank_node(r) : "");
  }
  hooks.console = false;  // the launcher shows the job's progress
  hooks.first.push_back(&reporter);
  Result<TrainSummary> summary = TrainJob(job, topt, backend->get(), world, local, hooks);
  *last_step = reporter.last_step();
  LOOM_RETURN_IF_ERROR(summary.status());
  proto::Done done;
  done.set_rank(req.rank());
  if (summary->stopped_by_signal != 0) {  // saved, then stopped: not done, but no error either
    *stopped_by = summary->stopped_by_signal;
    done.set_ok(false);
    done.set_error("stopped after step " + std::to_string(summary->stopped_at) + " on " +
                   StopSignalName(summary->stopped_by_signal) + ", with checkpoint " +
                   JoinPath(job.checkpoint.dir, StepDirName(summary->stopped_at)) + " saved");
    done.set_step(summary->stopped_at);
    done.set_stopped_by_signal(summary->stopped_by_signal);
    return (*client)->Finish(done);
  }
  done.set_ok(true);
  done.set_step(job.steps);
  done.set_first_step(summary->first_step);
  done.set_val_loss(summary->evals.empty() ? std::nan("") : summary->evals.back().second);
  done.set_train_loss(summary->train_loss);
  done.set_tokens_per_s(summary->tokens_per_second);
  // The prompt and what followed it, as loom train prints them; a proto3 string must be UTF-8.
  if (!summary->sample.empty()) {
    done.set_sample(PrintableUtf8(job.sample.prompt + summary->sample));
  }
  done.set_checkpoint(job.checkpoint.dir);
  return (*client)->Finish(done);
}

}  // namespace

void AddWorkerCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<WorkerOptions>();
  CLI::App* cmd = app.add_subcommand(
      "worker", "Run one rank of a coordinated job (started by loom launch, srun or by hand)");
  cmd->add_option("--coordinator", o->coordinator,
                  "Coordinator address host:port (default: LOOM_COORDINATOR)");
  cmd->add_option("--token", o->token, "Job token (default: LOOM_JOB_TOKEN)");
  cmd->add_option("--threads", o->threads, "Threads per rank (default: cores / local ranks)")
      ->check(PositiveInteger());
  cmd->add_option("--timeout-ms", o->timeout_ms, "Deadline of every exchange with the coordinator")
      ->check(CLI::Range(100, 3600000));
  cmd->callback([o, exit_code] {
    std::shared_ptr<Backend> backend;
    std::unique_ptr<CoordinatorClient> client;
    int64_t step = 0;
    int stopped_by = 0;
    Status st = RunCatching([&] { return RunWorker(*o, &backend, &client, &step, &stopped_by); });
    if (st.ok()) {
      *exit_code = StopExitCode(stopped_by);  // as loom train
      return;
    }
    *exit_code = ReportError("worker", st);
    if (client && client->status().ok()) {  // tell the coordinator why (best effort)
      proto::Done done;
      done.set_rank(backend ? backend->world_rank() : 0);
      done.set_ok(false);
      done.set_error(st.message().substr(0, st.message().find(" [at ")));
      done.set_step(step);
      // A deadline (a peer hung, died or was lost) is the others' failure, not this rank's.
      done.set_peer_failure(st.code() == StatusCode::kDeadlineExceeded ||
                            (backend && backend->Abandoned()));
      (void)client->Finish(done);
    }
    AbortAfterGrace(backend.get(), *exit_code);
  });
}

}  // namespace loom
