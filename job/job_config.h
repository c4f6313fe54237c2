// The job file (YAML): model, data, optimizer, schedule, steps, seed, evaluation, sampling,
// runtime, parallel layout, checkpoints and the planner's settings. It is parsed here and only
// here, into one typed description that the worker (`loom train`, `loom worker`), the planner
// (`loom plan`) and the launcher (`loom launch`) all use; job/job_rewrite.h changes its text for
// the workers. Every field is validated; an error names the file, the line, the field and what
// was expected (a field given twice and an unknown field are errors too). Relative paths are
// resolved against the job file's directory. docs/JOB.md lists every field with its default.
#pragma once

#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/precision.h"
#include "core/status.h"
#include "model/config.h"

namespace loom {

struct DataConfig {
  std::string text;           // a UTF-8 corpus tokenised on the fly (byte level), or:
  std::string train, val;     // token files from `loom data prepare`
  double val_fraction = 0.1;  // with `text`: the tail kept for evaluation
  int64_t seq = 128;
  int64_t global_batch = 8;  // sequences per optimizer step
  int64_t micro_batch = 0;   // sequences per forward/backward (0: global_batch / dp)
};

struct OptimConfig {
  double lr = 1e-3, min_lr = 1e-4;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // 0 disables clipping
};

struct ScheduleConfig {
  int64_t warmup_steps = 0;
  int64_t decay_steps = 0;        // cosine decay ends here (0: = steps)
  bool decay_from_steps = false;  // decay_steps was not given: the job file's `steps`
};

struct EvalConfig {
  int64_t every = 0;    // 0: only at the end
  int64_t batches = 4;  // global batches (data.global_batch sequences each) per evaluation
};

struct SampleConfig {
  int64_t tokens = 0;  // 0: no sample at the end
  double temperature = 0.8;
  int64_t top_k = 0;
  std::string prompt = "\n";
};

struct RuntimeConfig {
  int64_t threads = 0;                 // 0: hardware threads / local ranks (LOOM_THREADS overrides)
  std::optional<Recompute> recompute;  // absent: the planner's choice (loom train: none)
  int64_t attn_block_q = 64;
  int64_t attn_block_k = 256;
  int64_t vocab_chunk = 4096;
  int64_t log_every = 10;
};

// The parallel layout requested by the job (no section: one process, or pure data parallelism
// over every rank under mpirun). A field given is fixed; an absent one is the planner's to choose
// under `loom launch` and `loom plan`, and under `loom train` takes the default in brackets:
// tp, cp, pp, vpp [1], dp [whatever the world size leaves], zero [0], sp [false].
struct ParallelConfig {
  bool present = false;  // the job has a `parallel:` section
  std::optional<int64_t> tp, cp, pp, vpp, dp, zero;
  std::optional<bool> sp;
  // Uneven pipeline stages (parallel/layout.h): the layers of the first and the last pipeline
  // chunk; absent: as the others (the planner may choose them when pp is its to choose too).
  std::optional<int64_t> first_stage_layers, last_stage_layers;
  bool overlap = true;  // start gradient reductions during the backward
  // Pipeline schedule: gpipe | 1f1b | interleaved ("": the default, 1f1b, interleaved if
  // vpp > 1). zb-h1 is simulated (loom schedule) but not executed.
  std::string schedule;
  // True when tp, cp, pp and dp are all given (the world size is then their product).
  bool FullyFixed() const { return tp && cp && pp && dp; }
};

// The planner's own settings (`plan:`, docs/PLANNER.md), ignored by training.
struct PlanSettings {
  Precision precision = Precision::kFp32;  // default: the job's `precision`
  double headroom = 0.1;                   // fraction of device memory kept free
  int64_t devices = 0;                     // use at most this many devices (0: every usable one)
  bool selective_recompute = false;        // may the search choose selective recompute?
  bool dropout = false;  // the model applies dropout (Megatron's GPT does; Loom's does not)
};

// Universal checkpoints (docs/CHECKPOINT.md). Saving is on when `dir` is set.
struct CheckpointConfig {
  std::string dir;         // save root: <dir>/step_<N>/, <dir>/latest ("" : no saving)
  int64_t every = 0;       // save every N steps (0: only the final save)
  int64_t keep = 0;        // newest checkpoints kept under `dir` (0: all)
  int64_t keep_every = 0;  // also kept, whatever `keep` says: steps that are multiples of this
  bool async = true;       // write in the background while training continues
  bool final = true;       // save after the last step
  bool resume = true;      // start from the newest valid checkpoint under `load`
  std::string load;        // a root or one step directory to resume from ("": `dir`)
  // Whether resuming `load` also loads its AdamW state (moments and step count). false: the
  // weights, step, data position and schedule are loaded and the optimizer starts fresh
  // (Megatron's --no-load-optim). Only with `load`: a run's own checkpoints always resume whole.
  bool load_optimizer = true;
  // A root or one step directory whose model weights (fp32 masters) start the run when nothing
  // is resumed: fine-tuning. The step, data position, LR schedule and AdamW state start fresh.
  std::string init_from;
  // On this signal (0: none) the ranks agree at a step boundary, save, and exit 128 + signal
  // (core/stop_signal.h). Only with `dir`.
  int stop_signal = SIGUSR1;
  // Stop after the first step that ends this many minutes after the process started, saving it
  // (Megatron's --exit-duration-in-mins; 0: no limit). Only with `dir`.
  double exit_after_minutes = 0;
  // Once every step has run and the final checkpoint is committed, world rank 0 exports its
  // weights (torchtitan's last_save_model_only / export_dtype): to a .safetensors file with
  // Hugging Face GPT-2 names, or else to a Hugging Face model directory (model.safetensors and
  // config.json), as `loom ckpt export` does. "": none. Needs `dir` and `final`.
  std::string export_path;
  std::string export_dtype = "f32";  // f32 | bf16 | f16
  // Set from a command-line flag (--checkpoint-dir, --load, --init-from, --no-resume,
  // --exit-after-minutes, --no-load-optimizer) rather than the job file: errors then name the
  // flag the user typed.
  bool dir_from_flag = false, load_from_flag = false, init_from_from_flag = false;
  bool resume_from_flag = false, exit_after_from_flag = false, load_optimizer_from_flag = false;
};

// In-memory snapshots under `loom launch` (docs/SNAPSHOTS.md): every `every` steps each rank's
// state goes to node-local shared memory, erasure-coded RS(k, m) across nodes, and the job is
// restarted from them after a failure. k and m absent: chosen from the cluster (RS(4,2) from 6
// failure domains, RS(2,1) from 3, a mirror for 2, node-local only for 1); m = 0: node-local
// only.
struct SnapshotConfig {
  bool enabled = true;
  int64_t every = 1;
  std::optional<int64_t> k, m;
  int64_t max_restarts = 3;  // restarts `loom launch` makes before it gives up
};

// The anomaly detector under `loom launch` (docs/FAULTS.md): each rank reports its calls every
// step and where it is every beat_ms; the coordinator names a hung rank, a slow rank or a slow
// link, and (action restart, with snapshots on) isolates its node, replans on the rest and
// restarts from the in-memory snapshots.
struct DetectConfig {
  bool enabled = true;
  std::string action = "log";     // log | restart
  double slow_rank_score = 1.4;   // compute against peers' median
  double slow_link_factor = 1.5;  // a link's transfer floor against its class's median
  int64_t persist = 3;            // steps in a row before a slow rank or link is named
  double hang_s = 2;              // blocked at least this long (and 2 median steps): a hang?
  double stale_s = 2;             // no beat for this long: the rank is not running
  int64_t beat_ms = 250;          // the workers' beat period while the detector is on
  std::string trace_dir;          // post-mortem traces ("": <checkpoint.dir>/trace)
};

// What `loom launch` serves for people to watch the job (docs/OBSERVABILITY.md): Prometheus
// metrics at /metrics and the status page at / on address:port, and the run's series kept in
// run_dir/series.jsonl for `loom dashboard`.
struct MetricsConfig {
  bool enabled = true;
  std::string address = "127.0.0.1";
  int64_t port = 0;     // 0: any free port (printed at the start)
  std::string run_dir;  // "": checkpoint.dir when set, else the series is not kept
};

struct JobConfig {
  std::string path;                    // the job file
  std::string text;                    // its text as read (recorded in checkpoints)
  std::vector<std::string> overrides;  // command-line flags that changed it: "--steps 500"
  ModelConfig model;
  DataConfig data;
  OptimConfig optim;
  ScheduleConfig schedule;
  EvalConfig eval;
  SampleConfig sample;
  RuntimeConfig runtime;
  ParallelConfig parallel;
  CheckpointConfig checkpoint;
  SnapshotConfig snapshot;
  DetectConfig detect;
  MetricsConfig metrics;
  PlanSettings plan;
  // Training precision (`precision:`): fp32, or bf16 compute with fp32 master weights, optimizer
  // state, gradients and reductions (worker/gpt.h). The planner prices it unless plan.precision
  // names another.
  Precision precision = Precision::kFp32;
  int64_t steps = 100;
  bool steps_from_flag = false;  // set by --steps (errors name the flag)
  uint64_t seed = 1337;
  std::string launcher;  // mpirun | srun | none ("": srun in a Slurm allocation, else mpirun)
};

// What the job is read for. kTrain: everything training needs must be there (data source,
// optimizer, steps) and the layout's settings must be ones the trainer runs. kPlan (`loom plan`):
// the model, the batch and the layout are enough; training's sections are checked when present.
enum class JobUse { kTrain, kPlan };

Result<JobConfig> LoadJobConfig(const std::string& path, JobUse use = JobUse::kTrain);
// The same from the file's text (e.g. sent by the coordinator); relative paths are resolved
// against `path`'s directory and errors name `path`.
Result<JobConfig> ParseJobConfig(const std::string& text, const std::string& path,
                                 JobUse use = JobUse::kTrain);
// Cross-field checks of the checkpoint section, after command-line overrides
// (job/job_overrides.h); errors name the flag where one set the setting.
Status CheckCheckpointConfig(const JobConfig& job);

}  // namespace loom
