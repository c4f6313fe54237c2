// A training save's metadata, field by field.
#include "worker/save_metadata.h"

#include <algorithm>
#include <filesystem>

#include "checkpoint/format.h"
#include "checkpoint/metadata_specs.h"
#include "core/crc32c.h"
#include "core/version.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

void SetProvenance(const JobConfig& job, double loss, proto::Provenance* p) {
  p->set_loom_version(kLoomVersion);
  p->set_saved_at(UtcTimestamp());
  std::error_code ec;
  const fs::path job_path = job.path.empty() ? fs::path() : fs::absolute(job.path, ec);
  p->set_job_path(Utf8OrMarked(ec ? job.path : job_path.string()));
  if (job.text.size() <= kMaxRecordedJobBytes && IsUtf8(job.text)) p->set_job_yaml(job.text);
  for (const std::string& o : job.overrides) p->add_overrides(Utf8OrMarked(o));
  p->set_train_loss(loss);
}

void SetOptimizer(const JobConfig& job, int64_t optimizer_steps, proto::OptimizerState* o) {
  const OptimConfig& oc = job.optim;
  o->set_name("adamw");
  o->set_lr(oc.lr);
  o->set_min_lr(oc.min_lr);
  o->set_beta1(oc.beta1);
  o->set_beta2(oc.beta2);
  o->set_eps(oc.eps);
  o->set_weight_decay(oc.weight_decay);
  o->set_grad_clip(oc.grad_clip);
  o->set_warmup_steps(job.schedule.warmup_steps);
  o->set_decay_steps(job.schedule.decay_steps);
  o->set_step_count(optimizer_steps);
}

void SetData(const JobConfig& job, int64_t consumed, const TrainData& data, proto::DataState* d) {
  d->set_seed(job.seed);
  d->set_seq(job.data.seq);
  d->set_global_batch(job.data.global_batch);
  d->set_consumed_samples(consumed);
  d->set_source(data.source);
  d->set_train_tokens(data.tokens);
  d->set_train_sample_crc32c(data.crc);
}

}  // namespace

TrainData TrainDataOf(const JobConfig& job) {
  const std::string& p = job.data.text.empty() ? job.data.train : job.data.text;
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec);
  return TrainData{Utf8OrMarked(ec ? p : abs.lexically_normal().string()), 0, 0};
}

void IdentifyTokens(const std::vector<int32_t>& tokens, TrainData* data) {
  const size_t n = tokens.size(), part = std::min<size_t>(n, size_t{1} << 18);
  data->crc = Crc32c(tokens.data(), part * sizeof(int32_t));
  data->crc = Crc32c(tokens.data() + (n - part), part * sizeof(int32_t), data->crc);
  data->tokens = static_cast<int64_t>(n);
}

proto::CheckpointMetadata SaveMetadata(const JobConfig& job, const Layout& layout,
                                       const SavePoint& at, const TrainData& data) {
  proto::CheckpointMetadata m;
  m.set_step(at.step);
  SetProvenance(job, at.loss, m.mutable_provenance());
  SetModelSpec(job.model, m.mutable_model());
  SetLayoutSpec(layout, m.mutable_saved_layout());
  SetOptimizer(job, at.optimizer_steps, m.mutable_optimizer());
  SetData(job, at.consumed_samples, data, m.mutable_data());
  proto::RngState* r = m.mutable_rng();
  r->set_seed(job.seed);
  r->set_generator("splitmix64-counter (seed, stream, index): the seed is the whole state");
  return m;
}

}  // namespace loom
