// Job file parsing and cross-field validation: one reader per section.
#include "job/job_config.h"

#include <filesystem>
#include <limits>

#include "core/config_reader.h"
#include "core/file_util.h"
#include "core/stop_signal.h"
#include "core/tensor.h"
#include "job/job_overrides.h"
#include "model/config.h"
#include "parallel/pipeline/schedule.h"

namespace loom {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();

std::string Resolve(const std::string& job_path, const std::string& p) {
  if (p.empty() || std::filesystem::path(p).is_absolute()) return p;
  return (std::filesystem::path(job_path).parent_path() / p).lexically_normal().string();
}

Status ReadModel(ConfigSection s, ModelConfig* m) {
  LOOM_RETURN_IF_ERROR(s.Int("vocab", &m->vocab, true, 1, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Int("max_seq", &m->max_seq, true, 1, 1 << 20));
  LOOM_RETURN_IF_ERROR(s.Int("layers", &m->layers, true, 1, 4096));
  LOOM_RETURN_IF_ERROR(s.Int("heads", &m->heads, true, 1, 4096));
  LOOM_RETURN_IF_ERROR(s.Int("hidden", &m->hidden, true, 1, 1 << 20));
  if (m->hidden % m->heads != 0) {
    return InvalidArgument(s.Where("hidden") + ": expected a multiple of model.heads (" +
                           std::to_string(m->heads) + "), got " + std::to_string(m->hidden));
  }
  std::string family = ModelFamilyName(m->family);
  LOOM_RETURN_IF_ERROR(s.String("family", &family, false));
  Result<ModelFamily> f = ParseModelFamily(family);
  if (!f.ok()) return InvalidArgument(s.Where("family") + ": " + f.status().message());
  m->family = *f;
  m->tie_embeddings = !m->llama();  // Llama 3's default; Llama 3.2 1B/3B tie theirs
  for (const char* key : {"kv_heads", "rope_theta", "rope_scaling", "tie_embeddings"}) {
    if (!m->llama() && s.Has(key)) {
      return InvalidArgument(s.Where(key) + ": only with model.family llama (GPT-2 has no " +
                             "grouped-query attention, rotary positions or untied output)");
    }
  }
  LOOM_RETURN_IF_ERROR(s.Int("kv_heads", &m->kv_heads, false, 1, 4096));
  if (m->heads % m->kv() != 0) {
    return InvalidArgument(s.Where("kv_heads") + ": expected a divisor of model.heads (" +
                           std::to_string(m->heads) + "), got " + std::to_string(m->kv_heads));
  }
  LOOM_RETURN_IF_ERROR(s.Int("ffn_hidden", &m->ffn_hidden, false, 1, int64_t{1} << 24));
  LOOM_RETURN_IF_ERROR(s.Double("rope_theta", &m->rope_theta, false, 1.0, 1e12));
  if (s.Has("rope_scaling")) {
    LOOM_ASSIGN_OR_RETURN(ConfigSection r, s.Section("rope_scaling", true));
    std::string type;
    LOOM_RETURN_IF_ERROR(r.String("type", &type, true));
    if (type != "llama3") {
      return InvalidArgument(r.Where("type") +
                             ": expected llama3 (Llama 3.1's frequency scaling; linear, dynamic "
                             "and yarn scaling are not implemented), got '" +
                             type + "'");
    }
    RopeScaling& rs = m->rope_scaling;
    LOOM_RETURN_IF_ERROR(r.Double("factor", &rs.factor, true, 1.0, 1e6));
    LOOM_RETURN_IF_ERROR(r.Double("low_freq_factor", &rs.low_freq_factor, false, 1e-6, 1e6));
    LOOM_RETURN_IF_ERROR(r.Double("high_freq_factor", &rs.high_freq_factor, false, 1e-6, 1e6));
    LOOM_RETURN_IF_ERROR(r.Int("original_max_seq", &rs.original_max_seq, false, 1, 1 << 24));
    if (Status v = rs.Validate(); !v.ok()) {
      return InvalidArgument(r.Where("high_freq_factor") + ": " + v.message());
    }
    LOOM_RETURN_IF_ERROR(r.Finish());
  }
  LOOM_RETURN_IF_ERROR(s.Double("norm_eps", &m->norm_eps, false, 1e-12, 1.0));
  LOOM_RETURN_IF_ERROR(s.Bool("tie_embeddings", &m->tie_embeddings, false));
  return s.Finish();
}

Status ReadData(ConfigSection s, JobUse use, DataConfig* d) {
  LOOM_RETURN_IF_ERROR(s.String("text", &d->text, false));
  LOOM_RETURN_IF_ERROR(s.String("train", &d->train, false));
  LOOM_RETURN_IF_ERROR(s.String("val", &d->val, false));
  LOOM_RETURN_IF_ERROR(s.Double("val_fraction", &d->val_fraction, false, 0.0, 0.5));
  LOOM_RETURN_IF_ERROR(s.Int("seq", &d->seq, true, 1, 1 << 20));
  LOOM_RETURN_IF_ERROR(s.Int("global_batch", &d->global_batch, true, 1, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Int("micro_batch", &d->micro_batch, false, 1, kMaxInt));
  const bool both = !d->text.empty() && !d->train.empty();
  if (both || (use == JobUse::kTrain && d->text.empty() && d->train.empty())) {
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

Status ReadOptim(ConfigSection s, OptimConfig* o) {
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

Status ReadSchedule(ConfigSection s, int64_t steps, ScheduleConfig* sc) {
  LOOM_RETURN_IF_ERROR(s.Int("warmup_steps", &sc->warmup_steps, false, 0, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Int("decay_steps", &sc->decay_steps, false, 0, kMaxInt));
  if (sc->decay_steps == 0) {
    sc->decay_steps = steps;
    sc->decay_from_steps = true;
  }
  return s.Finish();
}

Status ReadEval(ConfigSection s, EvalConfig* e) {
  LOOM_RETURN_IF_ERROR(s.Int("every", &e->every, false, 0, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Int("batches", &e->batches, false, 1, kMaxInt));
  return s.Finish();
}

Status ReadSample(ConfigSection s, SampleConfig* m) {
  LOOM_RETURN_IF_ERROR(s.Int("tokens", &m->tokens, false, 0, 1 << 20));
  LOOM_RETURN_IF_ERROR(s.Double("temperature", &m->temperature, false, 0.0, 100.0));
  LOOM_RETURN_IF_ERROR(s.Int("top_k", &m->top_k, false, 0, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.String("prompt", &m->prompt, false));
  return s.Finish();
}

// Training runs none or full; the planner also prices selective.
Status ReadRecompute(ConfigSection& s, JobUse use, std::optional<Recompute>* out) {
  if (!s.Has("recompute")) return Status::Ok();
  std::string name;
  LOOM_RETURN_IF_ERROR(s.String("recompute", &name, true));
  Result<Recompute> r = ParseRecompute(name);
  if (use == JobUse::kTrain && (!r.ok() || *r == Recompute::kSelective)) {
    return InvalidArgument(s.Where("recompute") + ": expected 'none' or 'full', got '" + name +
                           "'");
  }
  if (!r.ok()) return InvalidArgument(s.Where("recompute") + ": " + r.status().message());
  *out = *r;
  return Status::Ok();
}

Status ReadRuntime(ConfigSection s, JobUse use, RuntimeConfig* r) {
  LOOM_RETURN_IF_ERROR(s.Int("threads", &r->threads, false, 0, 1024));
  LOOM_RETURN_IF_ERROR(ReadRecompute(s, use, &r->recompute));
  LOOM_RETURN_IF_ERROR(s.Int("attn_block_q", &r->attn_block_q, false, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(s.Int("attn_block_k", &r->attn_block_k, false, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(s.Int("vocab_chunk", &r->vocab_chunk, false, 1, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Int("log_every", &r->log_every, false, 1, kMaxInt));
  return s.Finish();
}

// An optional integer: present means "fixed".
Status Fixed(ConfigSection& s, const char* key, std::optional<int64_t>* out, int64_t min,
             int64_t max) {
  int64_t v = 0;
  if (!s.Has(key)) return Status::Ok();
  LOOM_RETURN_IF_ERROR(s.Int(key, &v, true, min, max));
  *out = v;
  return Status::Ok();
}

// The schedules the trainer runs, or (planning) the ones the planner prices.
Status ReadPipelineSchedule(ConfigSection& s, JobUse use, std::string* schedule) {
  LOOM_RETURN_IF_ERROR(s.String("schedule", schedule, false));
  if (schedule->empty()) return Status::Ok();
  Result<ScheduleKind> kind = ParseScheduleKind(*schedule);
  if (use == JobUse::kPlan && (!kind.ok() || *kind == ScheduleKind::kZeroBubbleH1)) {
    return InvalidArgument(s.Where("schedule") + ": expected gpipe, 1f1b or interleaved, got '" +
                           *schedule + "'");
  }
  if (!kind.ok()) {
    return InvalidArgument(s.Where("schedule") +
                           ": expected gpipe, 1f1b, interleaved or zb-h1, got '" + *schedule + "'");
  }
  if (*kind == ScheduleKind::kZeroBubbleH1) {
    return Unimplemented(s.Where("schedule") +
                         ": zb-h1 is simulated only (loom schedule); the executor runs gpipe, "
                         "1f1b and interleaved");
  }
  return Status::Ok();
}

Status ReadParallel(ConfigSection s, JobUse use, ParallelConfig* p) {
  LOOM_RETURN_IF_ERROR(Fixed(s, "tp", &p->tp, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(Fixed(s, "cp", &p->cp, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(Fixed(s, "pp", &p->pp, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(Fixed(s, "vpp", &p->vpp, 1, 1 << 10));
  LOOM_RETURN_IF_ERROR(Fixed(s, "dp", &p->dp, 1, 1 << 20));
  LOOM_RETURN_IF_ERROR(Fixed(s, "zero", &p->zero, 0, 3));
  LOOM_RETURN_IF_ERROR(Fixed(s, "first_stage_layers", &p->first_stage_layers, 1, 1 << 12));
  LOOM_RETURN_IF_ERROR(Fixed(s, "last_stage_layers", &p->last_stage_layers, 1, 1 << 12));
  if (s.Has("sp")) {
    bool sp = false;
    LOOM_RETURN_IF_ERROR(s.Bool("sp", &sp, true));
    p->sp = sp;
  }
  LOOM_RETURN_IF_ERROR(s.Bool("overlap", &p->overlap, false));
  LOOM_RETURN_IF_ERROR(ReadPipelineSchedule(s, use, &p->schedule));
  return s.Finish();
}

// A path field that is present must not be empty: it would read as "not set".
Status NonEmptyPaths(const ConfigSection& s, const CheckpointConfig& c) {
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"dir", &c.dir},
                                   {"load", &c.load},
                                   {"init_from", &c.init_from},
                                   {"export", &c.export_path}}) {
    if (s.Has(key) && value->empty()) {
      return InvalidArgument(
          s.Where(key) + ": expected a " +
          (std::string_view(key) == "export" ? "file or directory" : "directory") +
          " path, got an empty string");
    }
  }
  return Status::Ok();
}

Status ReadCheckpoint(ConfigSection s, CheckpointConfig* c) {
  LOOM_RETURN_IF_ERROR(s.String("dir", &c->dir, false));
  LOOM_RETURN_IF_ERROR(s.Int("every", &c->every, false, 0, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Int("keep", &c->keep, false, 0, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Int("keep_every", &c->keep_every, false, 0, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Bool("async", &c->async, false));
  LOOM_RETURN_IF_ERROR(s.Bool("final", &c->final, false));
  LOOM_RETURN_IF_ERROR(s.Bool("resume", &c->resume, false));
  LOOM_RETURN_IF_ERROR(s.String("load", &c->load, false));
  LOOM_RETURN_IF_ERROR(s.Bool("load_optimizer", &c->load_optimizer, false));
  LOOM_RETURN_IF_ERROR(s.String("init_from", &c->init_from, false));
  LOOM_RETURN_IF_ERROR(s.String("export", &c->export_path, false));
  LOOM_RETURN_IF_ERROR(s.String("export_dtype", &c->export_dtype, false));
  LOOM_RETURN_IF_ERROR(ParseFloatDType(c->export_dtype, s.Where("export_dtype")).status());
  LOOM_RETURN_IF_ERROR(NonEmptyPaths(s, *c));
  LOOM_RETURN_IF_ERROR(
      s.Double("exit_after_minutes", &c->exit_after_minutes, false, 0, 366.0 * 24 * 60));
  std::string stop_signal;
  LOOM_RETURN_IF_ERROR(s.String("signal", &stop_signal, false));
  if (s.Has("signal")) {  // '' too: a name is expected
    LOOM_ASSIGN_OR_RETURN(c->stop_signal, ParseStopSignal(stop_signal, s.Where("signal")));
  }
  return s.Finish();
}

Status ReadSnapshot(ConfigSection s, SnapshotConfig* c) {
  LOOM_RETURN_IF_ERROR(s.Bool("enabled", &c->enabled, false));
  LOOM_RETURN_IF_ERROR(s.Int("every", &c->every, false, 1, kMaxInt));
  int64_t k = 0, m = 0;
  LOOM_RETURN_IF_ERROR(s.Int("k", &k, false, 1, 32));
  LOOM_RETURN_IF_ERROR(s.Int("m", &m, false, 0, 8));
  if (s.Has("k") != s.Has("m") && !(s.Has("m") && m == 0)) {
    return InvalidArgument(s.Where(s.Has("k") ? "m" : "k") +
                           ": expected k and m together (RS(k, m)), or m: 0 alone for "
                           "node-local snapshots");
  }
  if (s.Has("k")) c->k = k;
  if (s.Has("m")) c->m = m;
  LOOM_RETURN_IF_ERROR(s.Int("max_restarts", &c->max_restarts, false, 0, 1000));
  return s.Finish();
}

Status ReadDetect(ConfigSection s, DetectConfig* c) {
  LOOM_RETURN_IF_ERROR(s.Bool("enabled", &c->enabled, false));
  LOOM_RETURN_IF_ERROR(s.String("action", &c->action, false));
  if (c->action != "log" && c->action != "restart") {
    return InvalidArgument(s.Where("action") + ": expected log or restart, got '" + c->action +
                           "'");
  }
  LOOM_RETURN_IF_ERROR(s.Double("slow_rank_score", &c->slow_rank_score, false, 1.05, 100.0));
  LOOM_RETURN_IF_ERROR(s.Double("slow_link_factor", &c->slow_link_factor, false, 1.05, 100.0));
  LOOM_RETURN_IF_ERROR(s.Int("persist", &c->persist, false, 1, 1000));
  LOOM_RETURN_IF_ERROR(s.Double("hang_s", &c->hang_s, false, 0.1, 86400.0));
  LOOM_RETURN_IF_ERROR(s.Double("stale_s", &c->stale_s, false, 0.1, 86400.0));
  LOOM_RETURN_IF_ERROR(s.Int("beat_ms", &c->beat_ms, false, 20, 600000));
  LOOM_RETURN_IF_ERROR(s.String("trace_dir", &c->trace_dir, false));
  if (static_cast<double>(c->beat_ms) / 1000 * 2 > c->stale_s) {
    return InvalidArgument(s.Where("beat_ms") + ": expected at most half of stale_s (" +
                           std::to_string(c->stale_s) + " s), got " + std::to_string(c->beat_ms) +
                           " ms");
  }
  return s.Finish();
}

Status ReadMetrics(ConfigSection s, MetricsConfig* c) {
  LOOM_RETURN_IF_ERROR(s.Bool("enabled", &c->enabled, false));
  LOOM_RETURN_IF_ERROR(s.String("address", &c->address, false));
  if (c->address.empty()) {
    return InvalidArgument(s.Where("address") + ": expected an IP address to listen on");
  }
  LOOM_RETURN_IF_ERROR(s.Int("port", &c->port, false, 0, 65535));
  LOOM_RETURN_IF_ERROR(s.String("run_dir", &c->run_dir, false));
  return s.Finish();
}

Status ReadPlan(ConfigSection s, PlanSettings* p) {
  std::string precision = PrecisionName(p->precision);
  LOOM_RETURN_IF_ERROR(s.String("precision", &precision, false));
  Result<Precision> parsed = ParsePrecision(precision);
  if (!parsed.ok()) return InvalidArgument(s.Where("precision") + ": " + parsed.status().message());
  p->precision = *parsed;
  LOOM_RETURN_IF_ERROR(s.Double("headroom", &p->headroom, false, 0.0, 0.9));
  LOOM_RETURN_IF_ERROR(s.Int("devices", &p->devices, false, 1, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Bool("selective_recompute", &p->selective_recompute, false));
  LOOM_RETURN_IF_ERROR(s.Bool("dropout", &p->dropout, false));
  return s.Finish();
}

Status ReadLauncher(ConfigSection& root, std::string* launcher) {
  LOOM_RETURN_IF_ERROR(root.String("launcher", launcher, false));
  if (!launcher->empty() && *launcher != "mpirun" && *launcher != "srun" && *launcher != "none") {
    return InvalidArgument(root.Where("launcher") + ": expected mpirun, srun or none, got '" +
                           *launcher + "'");
  }
  return Status::Ok();
}

// The model, the data and what training needs (the optimizer and the steps: optional when
// planning, their defaults then unused).
Status ReadCore(ConfigSection& root, JobUse use, JobConfig* job) {
  const bool train = use == JobUse::kTrain;
  LOOM_ASSIGN_OR_RETURN(ConfigSection model, root.Section("model", true));
  const std::string ffn_where = model.Where("ffn_hidden");
  LOOM_RETURN_IF_ERROR(ReadModel(std::move(model), &job->model));
  if (train && !job->model.llama() && job->model.ffn_hidden != 0 &&
      job->model.ffn_hidden != 4 * job->model.hidden) {
    return InvalidArgument(ffn_where + ": GPT-2 blocks are trained with ffn_hidden = 4 * hidden");
  }
  LOOM_ASSIGN_OR_RETURN(ConfigSection data, root.Section("data", true));
  const std::string seq_where = data.Where("seq");
  LOOM_RETURN_IF_ERROR(ReadData(std::move(data), use, &job->data));
  if (job->data.seq > job->model.max_seq) {
    return InvalidArgument(seq_where + ": expected at most model.max_seq (" +
                           std::to_string(job->model.max_seq) + "), got " +
                           std::to_string(job->data.seq));
  }
  if (train || root.Has("optimizer")) {
    LOOM_ASSIGN_OR_RETURN(ConfigSection optim, root.Section("optimizer", true));
    LOOM_RETURN_IF_ERROR(ReadOptim(std::move(optim), &job->optim));
  }
  std::string precision = PrecisionName(job->precision);
  LOOM_RETURN_IF_ERROR(root.String("precision", &precision, false));
  Result<Precision> parsed = ParsePrecision(precision);
  if (!parsed.ok()) {
    return InvalidArgument(root.Where("precision") + ": " + parsed.status().message());
  }
  job->precision = *parsed;
  job->plan.precision = job->precision;  // ReadPlan may override it for the planner
  LOOM_RETURN_IF_ERROR(root.Int("steps", &job->steps, train, 1, kMaxInt));
  int64_t seed = static_cast<int64_t>(job->seed);
  LOOM_RETURN_IF_ERROR(root.Int("seed", &seed, false, 0, std::numeric_limits<int64_t>::max()));
  job->seed = static_cast<uint64_t>(seed);
  return Status::Ok();
}

Status ReadJob(ConfigSection& root, JobUse use, JobConfig* job) {
  LOOM_RETURN_IF_ERROR(ReadCore(root, use, job));
  auto section = [&](const char* key) { return root.Section(key, false); };
  LOOM_ASSIGN_OR_RETURN(ConfigSection schedule, section("schedule"));
  LOOM_RETURN_IF_ERROR(ReadSchedule(std::move(schedule), job->steps, &job->schedule));
  LOOM_ASSIGN_OR_RETURN(ConfigSection eval, section("eval"));
  LOOM_RETURN_IF_ERROR(ReadEval(std::move(eval), &job->eval));
  LOOM_ASSIGN_OR_RETURN(ConfigSection sample, section("sample"));
  LOOM_RETURN_IF_ERROR(ReadSample(std::move(sample), &job->sample));
  LOOM_ASSIGN_OR_RETURN(ConfigSection runtime, section("runtime"));
  LOOM_RETURN_IF_ERROR(ReadRuntime(std::move(runtime), use, &job->runtime));
  job->parallel.present = root.Has("parallel");
  LOOM_ASSIGN_OR_RETURN(ConfigSection parallel, section("parallel"));
  LOOM_RETURN_IF_ERROR(ReadParallel(std::move(parallel), use, &job->parallel));
  LOOM_ASSIGN_OR_RETURN(ConfigSection checkpoint, section("checkpoint"));
  LOOM_RETURN_IF_ERROR(ReadCheckpoint(std::move(checkpoint), &job->checkpoint));
  LOOM_ASSIGN_OR_RETURN(ConfigSection snapshot, section("snapshot"));
  LOOM_RETURN_IF_ERROR(ReadSnapshot(std::move(snapshot), &job->snapshot));
  LOOM_ASSIGN_OR_RETURN(ConfigSection detect, section("detect"));
  LOOM_RETURN_IF_ERROR(ReadDetect(std::move(detect), &job->detect));
  LOOM_ASSIGN_OR_RETURN(ConfigSection metrics, section("metrics"));
  LOOM_RETURN_IF_ERROR(ReadMetrics(std::move(metrics), &job->metrics));
  LOOM_RETURN_IF_ERROR(ReadLauncher(root, &job->launcher));
  LOOM_ASSIGN_OR_RETURN(ConfigSection plan, section("plan"));
  LOOM_RETURN_IF_ERROR(ReadPlan(std::move(plan), &job->plan));
  return root.Finish();
}

void ResolvePaths(JobConfig* job) {
  const std::string& path = job->path;
  for (std::string* p : {&job->data.text, &job->data.train, &job->data.val, &job->checkpoint.dir,
                         &job->checkpoint.load, &job->checkpoint.init_from,
                         &job->checkpoint.export_path, &job->metrics.run_dir}) {
    *p = Resolve(path, *p);
  }
  std::string& ex = job->checkpoint.export_path;  // "hf/" names the directory hf
  while (ex.size() > 1 && ex.back() == '/') ex.pop_back();
}

Result<JobConfig> ReadJobConfig(Result<ConfigSection> parsed, const std::string& path, JobUse use) {
  LOOM_ASSIGN_OR_RETURN(ConfigSection root, std::move(parsed));
  JobConfig job;
  job.path = path;
  try {
    LOOM_RETURN_IF_ERROR(ReadJob(root, use, &job));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(path + ": " + e.what());
  }
  ResolvePaths(&job);
  return job;
}

}  // namespace

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

Result<JobConfig> LoadJobConfig(const std::string& path, JobUse use) {
  // Read once (a pipe such as --config <(...) can be read only once), parsed from the text.
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return ReadJobConfig(ConfigSection::LoadFile(path), path, use);  // its error
  return ParseJobConfig(*text, path, use);
}

Result<JobConfig> ParseJobConfig(const std::string& text, const std::string& path, JobUse use) {
  LOOM_ASSIGN_OR_RETURN(JobConfig job,
                        ReadJobConfig(ConfigSection::LoadString(text, path), path, use));
  job.text = text;
  return job;
}

}  // namespace loom
