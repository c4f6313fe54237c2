// One checkpoint loaded for this run, and what differs from the job said.
#include "worker/checkpoint_loader.h"

#include <sstream>
#include <utility>

#include "checkpoint/format.h"
#include "checkpoint/load_state.h"
#include "checkpoint/metadata_specs.h"
#include "checkpoint/reader.h"
#include "core/logging.h"

namespace loom {

CheckpointLoader::CheckpointLoader(const JobConfig& job, int world_rank, const ParamLayout& params,
                                   int tp_rank, RankState* state, const TrainData* data)
    : job_(job),
      rank_(world_rank),
      params_(params),
      tp_rank_(tp_rank),
      state_(state),
      data_(data) {}

Result<LoadedCheckpoint> CheckpointLoader::Load(const std::string& dir, LoadKind kind) const {
  const bool weights_only = kind == LoadKind::kWeightsOnly;
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::Open(dir));
  const proto::CheckpointMetadata& meta = reader->meta();
  const std::string path = JoinPath(dir, kMetadataFile);
  LoadedCheckpoint loaded;
  loaded.saved_layout = LayoutOf(meta.saved_layout()).ToString();
  // Weights (with or without the position): the master weights; the AdamW moments keep their
  // initial zeros.
  static_assert(static_cast<int>(StateKind::kParam) == 0);
  const int states = kind == LoadKind::kEverything ? kNumStates : 1;
  LOOM_RETURN_IF_ERROR(CheckSameModel(*reader, path, job_.model, states));
  LOOM_RETURN_IF_ERROR(ReadRankState(reader.get(), params_, tp_rank_, states, state_));
  if (kind == LoadKind::kEverything) state_->set_optimizer_steps(meta.optimizer().step_count());
  // A save before any step of this run (the final save of a run already at its last step)
  // records the loss the checkpoint recorded.
  if (!weights_only && meta.has_provenance() && !meta.provenance().job_path().empty()) {
    loaded.train_loss = meta.provenance().train_loss();
  }
  state_->StateLoaded();
  loaded.step = meta.step();
  if (!weights_only) LOOM_RETURN_IF_ERROR(TakeRunState(dir, meta, &loaded));
  return loaded;
}

Status CheckpointLoader::TakeRunState(const std::string& dir, const proto::CheckpointMetadata& meta,
                                      LoadedCheckpoint* loaded) const {
  // An imported checkpoint has weights and nothing of a run: no settings to compare. Loading it
  // is starting from its weights, which is what init_from says.
  if (IsImportedCheckpoint(meta)) {
    loaded->consumed_samples = 0;
    if (rank_ == 0) {
      LOOM_LOG(INFO, CKPT) << dir << " was imported (weights only, no training state): "
                           << "training starts at step 1 with the job's settings, as with "
                              "--init-from";
    }
    return Status::Ok();
  }
  const std::string path = JoinPath(dir, kMetadataFile);
  const proto::DataState& d = meta.data();
  if (d.consumed_samples() < 0) {
    return DataLoss(path + ": field 'data.consumed_samples': expected 0 or more, got " +
                    std::to_string(d.consumed_samples()));
  }
  loaded->consumed_samples = d.consumed_samples();
  if (rank_ == 0) {
    NoteOptimizerChanges(path, meta);
    NoteDataChanges(path, meta);
  }
  return Status::Ok();
}

void CheckpointLoader::NoteOptimizerChanges(const std::string& path,
                                            const proto::CheckpointMetadata& meta) const {
  // The LR schedule and AdamW settings are the job's, as a function of the step; say so when
  // they differ from the checkpoint's (e.g. `steps` raised to train longer moves the decay).
  const proto::OptimizerState& o = meta.optimizer();
  const OptimConfig& oc = job_.optim;
  const std::pair<const char*, std::pair<double, double>> settings[] = {
      {"lr", {o.lr(), oc.lr}},
      {"min_lr", {o.min_lr(), oc.min_lr}},
      {"warmup_steps",
       {static_cast<double>(o.warmup_steps()), static_cast<double>(job_.schedule.warmup_steps)}},
      {"decay_steps",
       {static_cast<double>(o.decay_steps()), static_cast<double>(job_.schedule.decay_steps)}},
      {"beta1", {o.beta1(), oc.beta1}},
      {"beta2", {o.beta2(), oc.beta2}},
      {"eps", {o.eps(), oc.eps}},
      {"weight_decay", {o.weight_decay(), oc.weight_decay}},
      {"grad_clip", {o.grad_clip(), oc.grad_clip}},
  };
  std::string changed;
  for (const auto& [name, v] : settings) {
    if (static_cast<float>(v.first) == static_cast<float>(v.second)) continue;
    std::ostringstream one;
    one << (changed.empty() ? "" : ", ") << name << " " << v.first << " -> " << v.second;
    changed += one.str();
  }
  if (!changed.empty()) {
    LOOM_LOG(WARN, CKPT) << path << ": the optimizer settings changed (" << changed << "): step "
                         << meta.step() + 1 << " on follows the job's schedule and settings";
  }
}

void CheckpointLoader::NoteDataChanges(const std::string& path,
                                       const proto::CheckpointMetadata& meta) const {
  const proto::DataState& d = meta.data();
  if (d.seed() != job_.seed || d.seq() != job_.data.seq) {
    std::ostringstream what;  // only what changed
    if (d.seed() != job_.seed) what << "seed " << d.seed() << " -> " << job_.seed;
    if (d.seed() != job_.seed && d.seq() != job_.data.seq) what << ", ";
    if (d.seq() != job_.data.seq) what << "seq " << d.seq() << " -> " << job_.data.seq;
    LOOM_LOG(WARN, CKPT) << path << ": the data settings changed (" << what.str()
                         << "): training continues at step " << meta.step() + 1
                         << " with the job's settings, so the data order is not continued";
  }
  // Other data (another corpus, or the file edited): the sample stream goes on in it. Checkpoints
  // before the source was recorded are not compared.
  const TrainData& now = *data_;
  const bool other_data = d.train_tokens() > 0 && now.tokens > 0 &&
                          (d.train_tokens() != now.tokens || d.train_sample_crc32c() != now.crc);
  if (!d.source().empty() && (other_data || d.source() != now.source)) {
    std::ostringstream what;
    what << d.source() << " (" << d.train_tokens() << " training tokens) -> " << now.source << " ("
         << now.tokens << ")";
    if (other_data) {
      LOOM_LOG(WARN, CKPT) << path << ": the training data changed (" << what.str()
                           << "): the sample stream continues after the " << d.consumed_samples()
                           << " samples consumed, drawn from the new data";
    } else {
      LOOM_LOG(INFO, CKPT) << path << ": the training data is read from another path ("
                           << what.str() << ", the same size and sampled checksum)";
    }
  }
  if (d.global_batch() != job_.data.global_batch && d.seed() == job_.seed &&
      d.seq() == job_.data.seq) {
    LOOM_LOG(INFO, CKPT) << path << ": global_batch " << d.global_batch() << " -> "
                         << job_.data.global_batch << ": the data continues after the "
                         << d.consumed_samples() << " samples consumed";
  }
}

}  // namespace loom
