// Planner-side reader of job.yaml. It reads only what planning needs and leaves every other
// section and key to `loom train`, which validates the whole file; so `model:`, `parallel:` and
// `plan:` are checked for unknown keys here, `data:` and `runtime:` are not (they hold keys the
// planner has no use for).
#include "coordinator/plan_job.h"

#include "core/config_reader.h"

namespace loom {
namespace {

constexpr int64_t kMaxInt = int64_t{1} << 40;

Status ReadModel(ConfigSection s, ModelShape* m) {
  LOOM_RETURN_IF_ERROR(s.Int("vocab", &m->vocab, true, 1, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Int("max_seq", &m->max_seq, true, 1, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Int("layers", &m->layers, true, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(s.Int("heads", &m->heads, true, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(s.Int("hidden", &m->hidden, true, 1, 1 << 24));
  if (m->hidden % m->heads != 0) {
    return InvalidArgument(s.Where("hidden") + ": expected a multiple of model.heads (" +
                           std::to_string(m->heads) + "), got " + std::to_string(m->hidden));
  }
  return s.Finish();
}

// Reads an optional integer into an optional: present means "fixed".
Status Fixed(ConfigSection& s, const char* key, std::optional<int64_t>* out, int64_t min,
             int64_t max) {
  int64_t v = 0;
  if (!s.Has(key)) return s.Int(key, &v, false, min, max);  // marks the key as read
  LOOM_RETURN_IF_ERROR(s.Int(key, &v, true, min, max));
  *out = v;
  return Status::Ok();
}

Status ReadParallel(ConfigSection s, PlanJob* job) {
  LOOM_RETURN_IF_ERROR(Fixed(s, "tp", &job->tp, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(Fixed(s, "cp", &job->cp, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(Fixed(s, "pp", &job->pp, 1, 1 << 16));
  LOOM_RETURN_IF_ERROR(Fixed(s, "vpp", &job->vpp, 1, 1 << 10));
  LOOM_RETURN_IF_ERROR(Fixed(s, "dp", &job->dp, 1, 1 << 20));
  LOOM_RETURN_IF_ERROR(Fixed(s, "zero", &job->zero, 0, 3));
  if (s.Has("sp")) {
    bool sp = false;
    LOOM_RETURN_IF_ERROR(s.Bool("sp", &sp, true));
    job->sp = sp;
  }
  LOOM_RETURN_IF_ERROR(s.Bool("overlap", &job->overlap, false));
  std::string schedule;
  LOOM_RETURN_IF_ERROR(s.String("schedule", &schedule, false));
  if (!schedule.empty()) {
    Result<ScheduleKind> kind = ParseScheduleKind(schedule);
    if (!kind.ok() || *kind == ScheduleKind::kZeroBubbleH1) {
      return InvalidArgument(s.Where("schedule") + ": expected gpipe, 1f1b or interleaved, got '" +
                             schedule + "'");
    }
    job->schedule = *kind;
  }
  return s.Finish();
}

Status ReadPlan(ConfigSection s, PlanJob* job) {
  std::string precision = PrecisionName(job->precision);
  LOOM_RETURN_IF_ERROR(s.String("precision", &precision, false));
  Result<Precision> p = ParsePrecision(precision);
  if (!p.ok()) return InvalidArgument(s.Where("precision") + ": " + p.status().message());
  job->precision = *p;
  LOOM_RETURN_IF_ERROR(s.Double("headroom", &job->headroom, false, 0.0, 0.9));
  LOOM_RETURN_IF_ERROR(s.Int("devices", &job->devices, false, 1, kMaxInt));
  LOOM_RETURN_IF_ERROR(s.Bool("selective_recompute", &job->selective_recompute, false));
  LOOM_RETURN_IF_ERROR(s.Bool("dropout", &job->dropout, false));
  return s.Finish();
}

}  // namespace

const char* RecomputeModeName(RecomputeMode r) {
  switch (r) {
    case RecomputeMode::kNone:
      return "none";
    case RecomputeMode::kSelective:
      return "selective";
    default:
      return "full";
  }
}

Result<RecomputeMode> ParseRecomputeMode(const std::string& name) {
  if (name == "none") return RecomputeMode::kNone;
  if (name == "selective") return RecomputeMode::kSelective;
  if (name == "full") return RecomputeMode::kFull;
  return InvalidArgument("expected none, selective or full, got '" + name + "'");
}

Result<PlanJob> LoadPlanJob(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(ConfigSection root, ConfigSection::LoadFile(path));
  PlanJob job;
  job.file = path;
  LOOM_ASSIGN_OR_RETURN(ConfigSection model, root.Section("model", true));
  LOOM_RETURN_IF_ERROR(ReadModel(std::move(model), &job.model));

  LOOM_ASSIGN_OR_RETURN(ConfigSection data, root.Section("data", true));
  LOOM_RETURN_IF_ERROR(data.Int("seq", &job.seq, true, 1, kMaxInt));
  LOOM_RETURN_IF_ERROR(data.Int("global_batch", &job.global_batch, true, 1, kMaxInt));
  LOOM_RETURN_IF_ERROR(Fixed(data, "micro_batch", &job.micro_batch, 1, kMaxInt));
  if (job.seq > job.model.max_seq) {
    return InvalidArgument(data.Where("seq") + ": expected at most model.max_seq (" +
                           std::to_string(job.model.max_seq) + "), got " + std::to_string(job.seq));
  }
  if (job.micro_batch && job.global_batch % *job.micro_batch != 0) {
    return InvalidArgument(
        data.Where("micro_batch") + ": expected a divisor of data.global_batch (" +
        std::to_string(job.global_batch) + "), got " + std::to_string(*job.micro_batch));
  }

  LOOM_ASSIGN_OR_RETURN(ConfigSection runtime, root.Section("runtime", false));
  if (runtime.Has("recompute")) {
    std::string r;
    LOOM_RETURN_IF_ERROR(runtime.String("recompute", &r, true));
    Result<RecomputeMode> mode = ParseRecomputeMode(r);
    if (!mode.ok()) {
      return InvalidArgument(runtime.Where("recompute") + ": " + mode.status().message());
    }
    job.recompute = *mode;
  }
  LOOM_ASSIGN_OR_RETURN(ConfigSection parallel, root.Section("parallel", false));
  LOOM_RETURN_IF_ERROR(ReadParallel(std::move(parallel), &job));
  LOOM_ASSIGN_OR_RETURN(ConfigSection plan, root.Section("plan", false));
  LOOM_RETURN_IF_ERROR(ReadPlan(std::move(plan), &job));
  return job;
}

}  // namespace loom
