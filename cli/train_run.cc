// Shared training run of `loom train` and `loom worker`.
#include "cli/train_run.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <new>
#include <thread>
#include <vector>

#include "comm/mpi/mpi_backend.h"
#include "core/file_util.h"
#include "core/logging.h"
#include "core/safetensors.h"
#include "core/threads.h"
#include "core/tunables.h"
#include "model/layout.h"
#include "parallel/layout.h"
#include "parallel/process_groups.h"
#include "worker/console_progress.h"

namespace loom {

Result<Layout> ResolveLayout(const JobConfig& job, int world) {
  const ParallelConfig& p = job.parallel;
  Layout l;
  l.tp = static_cast<int>(p.tp.value_or(1));
  l.cp = static_cast<int>(p.cp.value_or(1));
  l.pp = static_cast<int>(p.pp.value_or(1));
  l.vpp = static_cast<int>(p.vpp.value_or(1));
  l.zero = static_cast<int>(p.zero.value_or(0));
  l.sp = p.sp.value_or(false);
  l.first_stage_layers = static_cast<int>(p.first_stage_layers.value_or(0));
  l.last_stage_layers = static_cast<int>(p.last_stage_layers.value_or(0));
  const int model_parallel = l.tp * l.cp * l.pp;
  l.dp = p.dp ? static_cast<int>(*p.dp) : std::max(1, world / model_parallel);
  LayoutConstraints c{job.model.heads,  job.model.layers,      job.model.vocab,     job.data.seq,
                      job.model.hidden, job.data.global_batch, job.data.micro_batch};
  c.ffn = job.model.ffn();
  if (job.model.llama()) c.kv_heads = job.model.kv();
  Status st = l.Validate(world, c);
  if (!st.ok()) return st.WithContext(job.path + ": section 'parallel' (" + l.ToString() + ")");
  return l;
}

namespace {

Status WriteOutputs(const TrainOptions& opt, Trainer& trainer, const TrainSummary& summary) {
  if (!opt.dump_params.empty()) {
    std::vector<float> full;
    KeepIfAbandoned keep(trainer.placement().world);
    keep(full);
    LOOM_RETURN_IF_ERROR(trainer.GatherFullParams(&full));  // collective
    if (trainer.is_root()) {
      const ParamLayout canonical = ModelLayout(trainer.job().model, 1);
      std::vector<NamedTensor> tensors;
      for (const ParamInfo& p : canonical.params) {
        tensors.push_back({p.name, Tensor::Borrow(full.data() + p.offset, p.shape, DType::kF32)});
      }
      LOOM_RETURN_IF_ERROR(WriteSafetensors(opt.dump_params, tensors));
    }
  }
  if (!opt.dump_losses.empty() && trainer.is_root()) {
    std::ofstream f(opt.dump_losses);
    for (size_t i = 0; i < summary.losses.size(); ++i) {
      char line[64];
      std::snprintf(line, sizeof(line), "%lld %.17g\n",
                    static_cast<long long>(summary.first_step) + static_cast<long long>(i) + 1,
                    summary.losses[i]);
      f << line;
    }
    if (!f) return IoError("write '" + opt.dump_losses + "'");
  }
  return Status::Ok();
}

}  // namespace

Status CheckTrainOutputs(const TrainOptions& opt) {
  // The output files are written after training: a path that cannot take them is an error now,
  // not after the run.
  for (const auto& [flag, path] :
       {std::pair<const char*, const std::string*>{"--dump-losses", &opt.dump_losses},
        {"--dump-params", &opt.dump_params}}) {
    if (path->empty()) continue;
    LOOM_RETURN_IF_ERROR(CheckOutputFile(*path, "", flag));
    // Tried for real: permissions alone do not tell (root passes every check; /proc takes no
    // new files). Every rank runs this before it knows whether it is the one that writes, so a
    // new file is probed under a name of this process's own.
    const int fd = ::open(path->c_str(), O_WRONLY | O_CLOEXEC);  // an existing file: no O_TRUNC
    if (fd >= 0) {
      ::close(fd);
      continue;
    }
    if (errno != ENOENT) return ErrnoError(std::string(flag) + " '" + *path + "'", errno);
    const std::string probe = *path + ".probe." + std::to_string(::getpid());
    const int pfd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (pfd < 0) return ErrnoError(std::string(flag) + " '" + *path + "'", errno);
    ::close(pfd);
    ::unlink(probe.c_str());
  }
  return Status::Ok();
}

Status StartMpi(bool force, std::shared_ptr<Backend>* backend, int* world, int* local) {
  *world = 1;
  *local = 1;
  if (!LaunchedByMpi() && !force) return Status::Ok();
  LOOM_ASSIGN_OR_RETURN(*backend, CreateBackend(BackendKind::kMpi));
  *world = (*backend)->world_size();
  *local = (*backend)->local_size();
  SetLogRank((*backend)->world_rank());
  return Status::Ok();
}

Result<TrainSummary> TrainJob(const JobConfig& job, const TrainOptions& opt, Backend* backend,
                              int world, int local, const RunHooks& hooks) {
  LOOM_ASSIGN_OR_RETURN(Layout layout, ResolveLayout(job, world));
  int threads = opt.threads > 0           ? opt.threads
                : job.runtime.threads > 0 ? static_cast<int>(job.runtime.threads)
                                          : DefaultThreads(local);
  ConfigureThreads(threads);
  Placement place;  // one process; the trainer shares the communicators' ownership
  place.layout = layout;
  if (backend) {
    LOOM_ASSIGN_OR_RETURN(place, ProcessGroups::Create(*backend, layout));
  }
  std::optional<SnapshotSetup> snapshots = hooks.snapshots;
  if (snapshots) snapshots->backend = backend;
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer,
                        Trainer::Create(job, place, snapshots ? &*snapshots : nullptr));
  std::unique_ptr<ConsoleProgress> console;
  if (hooks.console) {
    console = std::make_unique<ConsoleProgress>(trainer->is_root(), !LaunchedByMpi());
  }
  std::vector<StepObserver*> observers = hooks.first;
  observers.push_back(trainer->checkpointer());
  observers.push_back(trainer->snapshotter());
  observers.push_back(console.get());
  Result<TrainSummary> summary = trainer->Run(observers);
  if (summary.ok()) {
    Status st = WriteOutputs(opt, *trainer, *summary);
    if (st.ok() && place.world) st = place.world->Barrier();
    if (!st.ok()) summary = st;
  }
  if (!summary.ok() && place.world && place.world->Abandoned()) {
    // A timed-out operation may still be inside MPI, writing into the trainer's buffers and using
    // the communicators when its late member arrives: keep them until the job's abort.
    (void)trainer.release();
    (void)new Placement(place);
  }
  return summary;
}

Status RunCatching(const std::function<Status()>& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Internal("out of memory");
  } catch (const std::exception& e) {
    return Internal(e.what());
  }
}

const IntTunable kAbortGraceTunable =
    RegisterTunable({"LOOM_ABORT_GRACE_MS", 5000, 0, kMaxTunableMs, "a number of ms"});

void AbortAfterGrace(Backend* backend, int code) {
  if (backend == nullptr || backend->world_size() <= 1) return;
  std::this_thread::sleep_for(std::chrono::milliseconds(TunableOr(kAbortGraceTunable)));
  backend->Abort(code);
}

}  // namespace loom
