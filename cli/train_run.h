// What `loom train` and `loom worker` share: starting MPI when the process is one rank of many,
// building the layout's communicators, and running the trainer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/backend.h"
#include "core/status.h"
#include "core/tunables.h"
#include "job/job_config.h"
#include "job/job_overrides.h"
#include "worker/trainer.h"

namespace loom {

// `loom train`'s flags: the job's overrides (job/job_overrides.h) and its own.
struct TrainOptions : JobOverrides {
  std::string config;
  int threads = 0;
  std::string dump_losses;  // per-step losses, one "step loss" line each (world rank 0)
  std::string dump_params;  // final parameters in single-process layout (safetensors)
};

// The files --dump-losses and --dump-params will be written to after training: an error now,
// naming the flag, when one cannot take them.
Status CheckTrainOutputs(const TrainOptions& opt);

// Creates the MPI backend (comm/backend.h) when launched by MPI or when `force`, else leaves
// *backend null; sets *world and *local (ranks on this host).
Status StartMpi(bool force, std::shared_ptr<Backend>* backend, int* world, int* local);

// Who watches the run (worker/step_observer.h), in this order: `first` (the coordinator
// reporter of `loom worker`), the trainer's checkpointer, and the console (worker/
// console_progress.h: world rank 0 prints) when `console`.
// The job's layout on `world` ranks: its parallel section, dp filling the rest; validated.
Result<Layout> ResolveLayout(const JobConfig& job, int world);

struct RunHooks {
  bool console = true;
  std::vector<StepObserver*> first;
  // In-memory snapshots (a coordinator's plan; its backend is filled in by TrainJob).
  std::optional<SnapshotSetup> snapshots;
};

// Trains `job` on this rank (backend null: one process): resolves and validates the layout,
// creates the communicators, runs, and writes the requested outputs. The trainer's summary is
// returned.
Result<TrainSummary> TrainJob(const JobConfig& job, const TrainOptions& opt, Backend* backend,
                              int world, int local, const RunHooks& hooks);

// Runs `fn`, turning an exception that escapes it (std::bad_alloc: memory ran out) into an
// error, so that the caller's backend is still there to abort the job (AbortAfterGrace)
// rather than being finalized while the other ranks wait in a collective.
Status RunCatching(const std::function<Status()>& fn);

// After a failure under MPI: outstanding operations can be neither completed nor cancelled, so
// the job is aborted after a grace period (LOOM_ABORT_GRACE_MS, default 5000) in which the other
// ranks' own deadlines expire and they report what they were waiting for.
void AbortAfterGrace(Backend* backend, int code);
extern const IntTunable kAbortGraceTunable;  // LOOM_ABORT_GRACE_MS

}  // namespace loom
