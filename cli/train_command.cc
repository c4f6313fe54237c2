// `loom train --config job.yaml`: training on one process, or on every rank of an mpirun launch
// with the job's `parallel:` layout (validated on every rank before any work).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "comm/mpi/mpi_runtime.h"
#include "core/logging.h"
#include "core/safetensors.h"
#include "core/threads.h"
#include "parallel/layout.h"
#include "worker/job_config.h"
#include "worker/trainer.h"

namespace loom {
namespace {

struct TrainOptions {
  std::string config;
  int threads = 0;
  int64_t steps = 0;
  std::string dump_losses;           // per-step losses, one "step loss" line each (world rank 0)
  std::string dump_params;           // final parameters in single-process layout (safetensors)
  std::string checkpoint_dir, load;  // override checkpoint.dir / checkpoint.load
  bool no_resume = false;
};

bool LaunchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_RANK");
}

Result<Layout> ResolveLayout(const JobConfig& job, int world) {
  const ParallelConfig& p = job.parallel;
  Layout l;
  l.tp = static_cast<int>(p.tp);
  l.cp = static_cast<int>(p.cp);
  l.pp = static_cast<int>(p.pp);
  l.vpp = static_cast<int>(p.vpp);
  l.zero = static_cast<int>(p.zero);
  l.sp = p.sp;
  const int model_parallel = l.tp * l.cp * l.pp;
  l.dp = p.dp > 0 ? static_cast<int>(p.dp) : std::max(1, world / model_parallel);
  LayoutConstraints c{job.model.heads,  job.model.layers,      job.model.vocab,     job.data.seq,
                      job.model.hidden, job.data.global_batch, job.data.micro_batch};
  Status st = l.Validate(world, c);
  if (!st.ok()) return st.WithContext(job.path + ": section 'parallel' (" + l.ToString() + ")");
  return l;
}

Status WriteOutputs(const TrainOptions& opt, Trainer& trainer, const TrainSummary& summary) {
  if (!opt.dump_params.empty()) {
    std::vector<float> full;
    LOOM_RETURN_IF_ERROR(trainer.GatherFullParams(&full));  // collective
    if (trainer.is_root()) {
      const ParamLayout canonical = ParamLayout::ForModel(trainer.job().model, 1);
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

Status RunTrain(const TrainOptions& opt, std::unique_ptr<MpiRuntime>* mpi) {
  LOOM_ASSIGN_OR_RETURN(JobConfig job, LoadJobConfig(opt.config));
  if (opt.steps > 0) job.steps = opt.steps;
  if (!opt.checkpoint_dir.empty()) job.checkpoint.dir = opt.checkpoint_dir;
  if (!opt.load.empty()) job.checkpoint.load = opt.load;
  if (opt.no_resume) job.checkpoint.resume = false;
  LOOM_RETURN_IF_ERROR(CheckCheckpointConfig(job));
  int world = 1, local = 1;
  if (LaunchedByMpi() || job.parallel.present) {
    int argc = 0;
    char** argv = nullptr;
    LOOM_ASSIGN_OR_RETURN(*mpi, MpiRuntime::Init(&argc, &argv));
    world = (*mpi)->world_size();
    local = (*mpi)->local_size();
    SetLogRank((*mpi)->world_rank());
  }
  LOOM_ASSIGN_OR_RETURN(Layout layout, ResolveLayout(job, world));
  int threads = opt.threads > 0           ? opt.threads
                : job.runtime.threads > 0 ? static_cast<int>(job.runtime.threads)
                                          : DefaultThreads(local);
  ConfigureThreads(threads);
  Placement place;
  place.layout = layout;
  std::unique_ptr<Communicator> world_comm;
  std::vector<std::unique_ptr<Communicator>> groups;  // outlive the trainer
  if (*mpi) {
    const int r = (*mpi)->world_rank();
    place.world_rank = r;
    LOOM_ASSIGN_OR_RETURN(world_comm, (*mpi)->World());
    place.world = world_comm.get();
    // Every rank creates its groups in the same order (group creation is collective).
    auto join = [&](GroupKind kind, bool needed, Communicator** slot) -> Status {
      if (!needed) return Status::Ok();
      LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> c,
                            (*mpi)->CreateGroup(GroupKindName(kind), layout.GroupOf(kind, r)));
      *slot = c.get();
      groups.push_back(std::move(c));
      return Status::Ok();
    };
    LOOM_RETURN_IF_ERROR(join(GroupKind::kTensor, layout.tp > 1, &place.tp));
    LOOM_RETURN_IF_ERROR(join(GroupKind::kContext, layout.cp > 1, &place.cp));
    LOOM_RETURN_IF_ERROR(join(GroupKind::kDataContext, layout.cp > 1, &place.dpcp));
    LOOM_RETURN_IF_ERROR(join(GroupKind::kPipeline, layout.pp > 1, &place.pp));
    LOOM_RETURN_IF_ERROR(join(GroupKind::kData, layout.dp > 1, &place.dp));
  }
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer, Trainer::Create(job, place));
  LOOM_ASSIGN_OR_RETURN(TrainSummary summary, trainer->Run());
  LOOM_RETURN_IF_ERROR(WriteOutputs(opt, *trainer, summary));
  if (world_comm) LOOM_RETURN_IF_ERROR(world_comm->Barrier());
  return Status::Ok();
}

}  // namespace

void AddTrainCommand(CLI::App& app, int* exit_code) {
  auto opt = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train a GPT model described by a job file");
  cmd->add_option("-c,--config", opt->config, "Job file (YAML)")->required();
  cmd->add_option("--threads", opt->threads,
                  "Threads per rank (default: runtime.threads or "
                  "cores / ranks on this host)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--steps", opt->steps, "Override the job's number of steps")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--checkpoint-dir", opt->checkpoint_dir,
                  "Save checkpoints here (overrides checkpoint.dir)");
  cmd->add_option("--load", opt->load,
                  "Resume from this checkpoint root or step directory (overrides checkpoint.load)");
  cmd->add_flag("--no-resume", opt->no_resume, "Start from step 0 even if checkpoints exist");
  cmd->add_option("--dump-losses", opt->dump_losses,
                  "Write per-step losses (\"step loss\" lines) to this file");
  cmd->add_option("--dump-params", opt->dump_params,
                  "Write the final parameters (single-process layout) to this safetensors file");
  cmd->callback([opt, exit_code] {
    std::unique_ptr<MpiRuntime> mpi;
    Status st = RunTrain(*opt, &mpi);
    if (!st.ok()) {
      *exit_code = ReportError("train", st);
      // Outstanding MPI operations can be neither completed nor cancelled: end the job instead
      // of hanging, after a grace period (LOOM_ABORT_GRACE_MS, default 5000) in which the other
      // ranks' own deadlines expire and they report what they were waiting for.
      if (mpi && mpi->world_size() > 1) {
        const char* g = std::getenv("LOOM_ABORT_GRACE_MS");
        std::this_thread::sleep_for(std::chrono::milliseconds(g ? std::atol(g) : 5000));
        mpi->Abort(*exit_code);
      }
      return;
    }
    *exit_code = 0;
  });
}

}  // namespace loom
