// Job file parsing and cross-field validation.
#include "worker/job_config.h"

#include <filesystem>
#include <iterator>
#include <limits>

#include "checkpoint/export.h"
#include "core/config_reader.h"
#include "core/file_util.h"
#include "core/stop_signal.h"
#include "parallel/pipeline/schedule.h"

namespace loom {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

std::string Resolve(const std::string& job_path, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
  return (std::filesystem::path(job_path).parent_path() / p).lexically_normal().string();
}

Status ReadModel(ConfigSection& s, ModelConfig* m) {
  LOOM_RETURN_IF_ERROR(s.Int("vocab", &m->vocab, true, 1, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Int("max_seq", &m->max_seq, true, 1, 1 << 20));
  LOOM_RETURN_IF_ERROR(s.Int("layers", &m->layers, true, 1, 4096));
  LOOM_RETURN_IF_ERROR(s.Int("heads", &m->heads, true, 1, 4096));
  LOOM_RETURN_IF_ERROR(s.Int("hidden", &m->hidden, true, 1, 1 << 20));
  if (m->hidden % m->heads != 0) {
    return InvalidArgument(s.Where("hidden") + ": expected a multiple of model.heads (" +
                           std::to_string(m->heads) + "), got " + std::to_string(m->hidden));
  }
  return s.Finish();
}

Status ReadData(ConfigSection& s, DataConfig* d) {
  LOOM_RETURN_IF_ERROR(s.String("text", &d->text, false));
  LOOM_RETURN_IF_ERROR(s.String("train", &d->train, false));
  LOOM_RETURN_IF_ERROR(s.String("val", &d->val, false));
  LOOM_RETURN_IF_ERROR(s.Double("val_fraction", &d->val_fraction, false, 0.0, 0.5));
  LOOM_RETURN_IF_ERROR(s.Int("seq", &d->seq, true, 1, 1 << 20));
  LOOM_RETURN_IF_ERROR(s.Int("global_batch", &d->global_batch, true, 1, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Int("micro_batch", &d->micro_batch, false, 1, kMaxInt));
  if (d->text.empty() == d->train.empty()) {
    return InvalidArgument(s.Where("text") +
                           ": expected exactly one of 'text' (a corpus) or 'train' (a token file)");
  }
  // Absent (0): global_batch / dp, known only with the layout (Trainer::Init), as DeepSpeed
  // derives it: no gradient accumulation.
  if (d->micro_batch > 0 && d->global_batch % d->micro_batch != 0) {
    return InvalidArgument(s.Where("micro_batch") + ": expected a divisor of data.global_batch (" +
                           std::to_string(d->global_batch) + "), got " +
                           std::to_string(d->micro_batch));
  }
  return s.Finish();
}

Status ReadOptim(ConfigSection& s, OptimConfig* o) {
  LOOM_RETURN_IF_ERROR(s.Double("lr", &o->lr, true, 0.0, 10.0));
  LOOM_RETURN_IF_ERROR(s.Double("min_lr", &o->min_lr, false, 0.0, 10.0));
  LOOM_RETURN_IF_ERROR(s.Double("beta1", &o->beta1, false, 0.0, 0.999999));
  LOOM_RETURN_IF_ERROR(s.Double("beta2", &o->beta2, false, 0.0, 0.999999));
  LOOM_RETURN_IF_ERROR(s.Double("eps", &o->eps, false, 0.0, 1.0));
  LOOM_RETURN_IF_ERROR(s.Double("weight_decay", &o->weight_decay, false, 0.0, 10.0));
  LOOM_RETURN_IF_ERROR(s.Double("grad_clip", &o->grad_clip, false, 0.0, 1e9));
  if (o->min_lr > o->lr) {
    return InvalidArgument(s.Where("min_lr") + ": expected at most optimizer.lr");
  }
  return s.Finish();
}

Status ReadRuntime(ConfigSection& s, RuntimeConfig* r) {
  LOOM_RETURN_IF_ERROR(s.Int("threads", &r->threads, false, 0, 1024));
  std::string recompute = "none";
  LOOM_RETURN_IF_ERROR(s.String("recompute", &recompute, false));
  if (recompute == "none") {
    r->recompute = Recompute::kNone;
  } else if (recompute == "full") {
    r->recompute = Recompute::kFull;
  } else {
    return InvalidArgument(s.Where("recompute") + ": expected 'none' or 'full', got '" + recompute +
                           "'");
  }
  LOOM_RETURN_IF_ERROR(s.Int("attn_block_q", &r->attn_block_q, false, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(s.Int("attn_block_k", &r->attn_block_k, false, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(s.Int("vocab_chunk", &r->vocab_chunk, false, 1, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Int("log_every", &r->log_every, false, 1, kMaxInt));
  return s.Finish();
}

Status ReadJob(ConfigSection& root, JobConfig* job) {
  LOOM_ASSIGN_OR_RETURN(ConfigSection model, root.Section("model", true));
  LOOM_RETURN_IF_ERROR(ReadModel(model, &job->model));
  LOOM_ASSIGN_OR_RETURN(ConfigSection data, root.Section("data", true));
  LOOM_RETURN_IF_ERROR(ReadData(data, &job->data));
  if (job->data.seq > job->model.max_seq) {
    return InvalidArgument(data.Where("seq") + ": expected at most model.max_seq (" +
                           std::to_string(job->model.max_seq) + "), got " +
                           std::to_string(job->data.seq));
  }
  LOOM_ASSIGN_OR_RETURN(ConfigSection optim, root.Section("optimizer", true));
  LOOM_RETURN_IF_ERROR(ReadOptim(optim, &job->optim));
  LOOM_RETURN_IF_ERROR(root.Int("steps", &job->steps, true, 1, kMaxInt));
  int64_t seed = static_cast<int64_t>(job->seed);
  LOOM_RETURN_IF_ERROR(root.Int("seed", &seed, false, 0, std::numeric_limits<int64_t>::max()));
  job->seed = static_cast<uint64_t>(seed);

  LOOM_ASSIGN_OR_RETURN(ConfigSection sched, root.Section("schedule", false));
  LOOM_RETURN_IF_ERROR(sched.Int("warmup_steps", &job->schedule.warmup_steps, false, 0, kMaxInt));
  LOOM_RETURN_IF_ERROR(sched.Int("decay_steps", &job->schedule.decay_steps, false, 0, kMaxInt));
  LOOM_RETURN_IF_ERROR(sched.Finish());
  if (job->schedule.decay_steps == 0) {
    job->schedule.decay_steps = job->steps;
    job->schedule.decay_from_steps = true;
  }

  LOOM_ASSIGN_OR_RETURN(ConfigSection eval, root.Section("eval", false));
  LOOM_RETURN_IF_ERROR(eval.Int("every", &job->eval.every, false, 0, kMaxInt));
  LOOM_RETURN_IF_ERROR(eval.Int("batches", &job->eval.batches, false, 1, kMaxInt));
  LOOM_RETURN_IF_ERROR(eval.Finish());

  LOOM_ASSIGN_OR_RETURN(ConfigSection sample, root.Section("sample", false));
  LOOM_RETURN_IF_ERROR(sample.Int("tokens", &job->sample.tokens, false, 0, 1 << 20));
  LOOM_RETURN_IF_ERROR(sample.Double("temperature", &job->sample.temperature, false, 0.0, 100.0));
  LOOM_RETURN_IF_ERROR(sample.Int("top_k", &job->sample.top_k, false, 0, kMaxInt));
  LOOM_RETURN_IF_ERROR(sample.String("prompt", &job->sample.prompt, false));
  LOOM_RETURN_IF_ERROR(sample.Finish());

  LOOM_ASSIGN_OR_RETURN(ConfigSection runtime, root.Section("runtime", false));
  LOOM_RETURN_IF_ERROR(ReadRuntime(runtime, &job->runtime));

  job->parallel.present = root.Has("parallel");
  LOOM_ASSIGN_OR_RETURN(ConfigSection par, root.Section("parallel", false));
  ParallelConfig& p = job->parallel;
  LOOM_RETURN_IF_ERROR(par.Int("tp", &p.tp, false, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(par.Int("cp", &p.cp, false, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(par.Int("pp", &p.pp, false, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(par.Int("vpp", &p.vpp, false, 1, 1 << 10));
  LOOM_RETURN_IF_ERROR(par.Int("dp", &p.dp, false, 1, 1 << 20));
  LOOM_RETURN_IF_ERROR(par.Int("zero", &p.zero, false, 0, 3));
  LOOM_RETURN_IF_ERROR(par.Bool("sp", &p.sp, false));
  LOOM_RETURN_IF_ERROR(par.Bool("overlap", &p.overlap, false));
  LOOM_RETURN_IF_ERROR(par.String("schedule", &p.schedule, false));
  if (!p.schedule.empty() && !ParseScheduleKind(p.schedule).ok()) {
    return InvalidArgument(par.Where("schedule") +
                           ": expected gpipe, 1f1b, interleaved or zb-h1, got '" + p.schedule +
                           "'");
  }
  if (p.schedule == "zb-h1") {
    return Unimplemented(par.Where("schedule") +
                         ": zb-h1 is simulated only (loom schedule); the executor runs gpipe, "
                         "1f1b and interleaved");
  }
  LOOM_RETURN_IF_ERROR(par.Finish());

  LOOM_ASSIGN_OR_RETURN(ConfigSection ck, root.Section("checkpoint", false));
  CheckpointConfig& c = job->checkpoint;
  LOOM_RETURN_IF_ERROR(ck.String("dir", &c.dir, false));
  LOOM_RETURN_IF_ERROR(ck.Int("every", &c.every, false, 0, kMaxInt));
  LOOM_RETURN_IF_ERROR(ck.Int("keep", &c.keep, false, 0, kMaxInt));
  LOOM_RETURN_IF_ERROR(ck.Int("keep_every", &c.keep_every, false, 0, kMaxInt));
  LOOM_RETURN_IF_ERROR(ck.Bool("async", &c.async, false));
  LOOM_RETURN_IF_ERROR(ck.Bool("final", &c.final, false));
  LOOM_RETURN_IF_ERROR(ck.Bool("resume", &c.resume, false));
  LOOM_RETURN_IF_ERROR(ck.String("load", &c.load, false));
  LOOM_RETURN_IF_ERROR(ck.Bool("load_optimizer", &c.load_optimizer, false));
  LOOM_RETURN_IF_ERROR(ck.String("init_from", &c.init_from, false));
  LOOM_RETURN_IF_ERROR(ck.String("export", &c.export_path, false));
  LOOM_RETURN_IF_ERROR(ck.String("export_dtype", &c.export_dtype, false));
  LOOM_RETURN_IF_ERROR(ParseExportDtype(c.export_dtype, ck.Where("export_dtype")).status());
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"dir", &c.dir},
                                   {"load", &c.load},
                                   {"init_from", &c.init_from},
                                   {"export", &c.export_path}}) {
    if (ck.Has(key) && value->empty()) {  // else it would read as "not set"
      return InvalidArgument(
          ck.Where(key) + ": expected a " +
          (std::string_view(key) == "export" ? "file or directory" : "directory") +
          " path, got an empty string");
    }
  }
  LOOM_RETURN_IF_ERROR(
      ck.Double("exit_after_minutes", &c.exit_after_minutes, false, 0, 366.0 * 24 * 60));
  std::string stop_signal;
  LOOM_RETURN_IF_ERROR(ck.String("signal", &stop_signal, false));
  if (ck.Has("signal")) {  // '' too: a name is expected
    LOOM_ASSIGN_OR_RETURN(c.stop_signal, ParseStopSignal(stop_signal, ck.Where("signal")));
  }
  LOOM_RETURN_IF_ERROR(ck.Finish());

  LOOM_RETURN_IF_ERROR(root.String("launcher", &job->launcher, false));
  if (!job->launcher.empty() && job->launcher != "mpirun" && job->launcher != "srun" &&
      job->launcher != "none") {
    return InvalidArgument(root.Where("launcher") + ": expected mpirun, srun or none, got '" +
                           job->launcher + "'");
  }

  // Planner-only settings (docs/PLANNER.md): checked here so a typo is caught, used by loom plan.
  LOOM_ASSIGN_OR_RETURN(ConfigSection plan, root.Section("plan", false));
  std::string precision;
  double headroom = 0.1;
  int64_t devices = 1;
  bool flag = false;
  LOOM_RETURN_IF_ERROR(plan.String("precision", &precision, false));
  if (!precision.empty() && precision != "fp32" && precision != "bf16") {
    return InvalidArgument(plan.Where("precision") + ": expected fp32 or bf16, got '" + precision +
                           "'");
  }
  LOOM_RETURN_IF_ERROR(plan.Double("headroom", &headroom, false, 0.0, 0.9));
  LOOM_RETURN_IF_ERROR(plan.Int("devices", &devices, false, 1, kMaxInt));
  LOOM_RETURN_IF_ERROR(plan.Bool("selective_recompute", &flag, false));
  LOOM_RETURN_IF_ERROR(plan.Bool("dropout", &flag, false));
  LOOM_RETURN_IF_ERROR(plan.Finish());
  return root.Finish();
}

}  // namespace

namespace {

// The flags that set checkpoint settings, one row each: the key under `checkpoint:`, the flag, and
// the bit that records that the flag set it. CheckpointSetting and MarkSetByFlag both read it.
struct CheckpointFlag {
  std::string_view key, flag;
  bool CheckpointConfig::*from_flag;
};
constexpr CheckpointFlag kCheckpointFlags[] = {
    {"dir", "--checkpoint-dir", &CheckpointConfig::dir_from_flag},
    {"load", "--load", &CheckpointConfig::load_from_flag},
    {"init_from", "--init-from", &CheckpointConfig::init_from_from_flag},
    {"resume", "--no-resume", &CheckpointConfig::resume_from_flag},
    {"exit_after_minutes", "--exit-after-minutes", &CheckpointConfig::exit_after_from_flag},
    {"load_optimizer", "--no-load-optimizer", &CheckpointConfig::load_optimizer_from_flag},
};

}  // namespace

std::string CheckpointSetting(const JobConfig& job, std::string_view key) {
  for (const CheckpointFlag& f : kCheckpointFlags) {
    if (f.key == key && job.checkpoint.*f.from_flag) return std::string(f.flag);
  }
  return job.path + ": field 'checkpoint." + std::string(key) + "'";
}

bool MarkSetByFlag(std::string_view flag, JobConfig* job) {
  if (flag == "--steps") return job->steps_from_flag = true;
  for (const CheckpointFlag& f : kCheckpointFlags) {
    if (f.flag == flag) return job->checkpoint.*f.from_flag = true;
  }
  return false;
}

Status CheckCheckpointConfig(const JobConfig& job) {
  const CheckpointConfig& c = job.checkpoint;
  if (!c.resume && !c.load.empty()) {
    return InvalidArgument(
        CheckpointSetting(job, "load") + ": set, but " +
        (c.resume_from_flag ? std::string("--no-resume is given") : "checkpoint.resume is false") +
        ": say which you mean");
  }
  if (!c.load.empty() && !c.init_from.empty()) {
    return InvalidArgument(CheckpointSetting(job, "init_from") + ": set together with " +
                           (c.load_from_flag ? "--load" : "checkpoint.load") +
                           ": load resumes a run, init_from starts a new one from a "
                           "checkpoint's weights only; say which you mean");
  }
  if (!c.load_optimizer && c.load.empty()) {
    return InvalidArgument(CheckpointSetting(job, "load_optimizer") +
                           ": needs checkpoint.load (or --load), the checkpoint whose weights and "
                           "position are taken without its optimizer state; a run's own "
                           "checkpoints always resume whole" +
                           (c.dir.empty() ? std::string()
                                          : " (to take this run's newest without it: --load " +
                                                c.dir + " --no-load-optimizer)"));
  }
  if (!c.export_path.empty() && (c.dir.empty() || !c.final)) {
    return InvalidArgument(job.path +
                           ": field 'checkpoint.export': made from the final "
                           "checkpoint, so it needs checkpoint.dir (or --checkpoint-dir) and "
                           "checkpoint.final: true");
  }
  if (c.dir.empty() && c.exit_after_minutes > 0) {
    return InvalidArgument(CheckpointSetting(job, "exit_after_minutes") +
                           ": set, but no checkpoint.dir (or --checkpoint-dir) to save the step it "
                           "stops after");
  }
  if (c.dir.empty() && (c.every > 0 || c.keep > 0 || c.keep_every > 0)) {
    return InvalidArgument(job.path +
                           ": field 'checkpoint.dir': expected a directory (or --checkpoint-dir) "
                           "when checkpoint.every, keep or keep_every is set");
  }
  return Status::Ok();
}

namespace {

Result<JobConfig> ReadJobConfig(Result<ConfigSection> parsed, const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(ConfigSection root, std::move(parsed));
  JobConfig job;
  job.path = path;
  try {
    LOOM_RETURN_IF_ERROR(ReadJob(root, &job));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(path + ": " + e.what());
  }
  job.data.text = Resolve(path, job.data.text);
  job.data.train = Resolve(path, job.data.train);
  job.data.val = Resolve(path, job.data.val);
  job.checkpoint.dir = Resolve(path, job.checkpoint.dir);
  job.checkpoint.load = Resolve(path, job.checkpoint.load);
  job.checkpoint.init_from = Resolve(path, job.checkpoint.init_from);
  job.checkpoint.export_path = Resolve(path, job.checkpoint.export_path);
  std::string& ex = job.checkpoint.export_path;  // "hf/" names the directory hf
  while (ex.size() > 1 && ex.back() == '/') ex.pop_back();
  return job;
}

}  // namespace

Result<JobConfig> LoadJobConfig(const std::string& path) {
  // Read once (a pipe such as --config <(...) can be read only once), parsed from the text.
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return ReadJobConfig(ConfigSection::LoadFile(path), path);  // its own error
  return ParseJobConfig(*text, path);
}

Result<JobConfig> ParseJobConfig(const std::string& text, const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(JobConfig job, ReadJobConfig(ConfigSection::LoadString(text, path), path));
  job.text = text;
  return job;
}

}  // namespace loom
