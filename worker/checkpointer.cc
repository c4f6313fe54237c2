// Checkpoint saving and resuming in the training loop.
#include "worker/checkpointer.h"

#include <sys/statvfs.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <thread>

#include "checkpoint/export.h"
#include "checkpoint/import.h"
#include "checkpoint/reader.h"
#include "core/crc32c.h"
#include "core/env.h"
#include "core/file_util.h"
#include "core/logging.h"
#include "core/version.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// Deadline for this rank's background writer when a save must complete (LOOM_CKPT_TIMEOUT_MS).
int64_t WriterTimeoutMs() {
  return TunableOr(kCkptTimeoutTunable);
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Flags exchanged while a save is in flight (the maximum over ranks wins).
constexpr int kWritten = 0, kWriting = 1, kFailed = 2;

// The checkpoint root of `source`: itself, or the parent of a step directory.
std::string RootOf(const std::string& source) {
  if (!IsStepDir(source)) return source;
  // "ck/step_6/" names the step directory too: its parent is ck, not ck/step_6.
  const std::string parent = fs::path(NormalPath(source)).parent_path().string();
  return parent.empty() ? "." : parent;
}

// Whether `dir` holds checkpoints of a run that started from checkpoint.load `load`: its
// load_origin file names it (as CanonicalPath gives it). Restore continues those.
bool ContinuesLoad(const std::string& dir, const std::string& load) {
  Result<std::string> recorded = ReadRegularFile(JoinPath(dir, kLoadOriginFile), 65536);
  return recorded.ok() && *recorded == CanonicalPath(load) + "\n" && !ListCheckpoints(dir).empty();
}

}  // namespace

int64_t CheckpointTimeoutMs() {
  return WriterTimeoutMs();
}

namespace {
std::atomic<int> g_checkpoint_io{0};

// checkpoint.export: a .safetensors path is one file, anything else a Hugging Face directory.
bool ExportsOneFile(const CheckpointConfig& c) {
  return fs::path(c.export_path).extension() == ".safetensors";
}

// The export is written after the last step: a destination that cannot take it is an error
// before the run, not after it.
Status CheckExportDestination(const JobConfig& job) {
  const CheckpointConfig& c = job.checkpoint;
  const std::string field = job.path + ": field 'checkpoint.export'";
  LOOM_RETURN_IF_ERROR(CheckOutsideCheckpoints(c.export_path, "", field));
  std::error_code ec;
  const fs::path parent = fs::absolute(c.export_path, ec).parent_path();
  if (!fs::is_directory(parent, ec)) {
    return InvalidArgument(field + ": '" + parent.string() +
                           "' is not a directory (the export goes in it)");
  }
  if (ExportsOneFile(c)) return CheckOutputFile(c.export_path, "", field);
  if (fs::exists(c.export_path, ec) && !fs::is_directory(c.export_path, ec)) {
    return InvalidArgument(field + ": '" + c.export_path +
                           "' exists and is not a directory (without the .safetensors "
                           "extension the export is a Hugging Face model directory)");
  }
  return Status::Ok();
}

// The training data as checkpoints record it: data.text or data.train, absolute.
std::string DataSource(const JobConfig& job) {
  const std::string& p = job.data.text.empty() ? job.data.train : job.data.text;
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec);
  return ec ? p : abs.lexically_normal().string();
}

// Marks a stretch of checkpoint I/O the step loop waits for (heartbeats carry it).
struct CheckpointIoScope {
  CheckpointIoScope() { g_checkpoint_io.fetch_add(1); }
  ~CheckpointIoScope() { g_checkpoint_io.fetch_sub(1); }
};
}  // namespace

bool CheckpointIoInProgress() {
  return g_checkpoint_io.load() > 0;
}

std::string DescribeRestart(const JobConfig& job) {
  const CheckpointConfig& c = job.checkpoint;
  if (c.dir.empty()) {
    return c.load.empty()
               ? "the job saves no checkpoints"
               : "the job saves no checkpoints; the same command loads " + c.load + " again";
  }
  const auto list = ListCheckpoints(c.dir);
  if (list.empty()) {
    const std::string again = !c.resume         ? ""
                              : !c.load.empty() ? "; the same command loads " + c.load + " again"
                              : !c.init_from.empty() ? "; the same command starts again from the "
                                                       "weights of " +
                                                           c.init_from
                                                     : "";
    return "no checkpoint has been committed under " + c.dir + again;
  }
  // What Restore would do with them: resume (the run's own, or one begun from this load), or
  // refuse them (another run's, or checkpoint.resume false).
  const bool resumes = c.resume && (c.load.empty() || ContinuesLoad(c.dir, c.load));
  return "the newest committed checkpoint is " + list.front().second +
         (resumes ? " (the same command resumes from it)" : "");
}

void Checkpointer::SetTrainData(const std::vector<int32_t>& tokens) {
  // The first and last 2^18 tokens: enough to tell other data apart, cheap at any size.
  const size_t n = tokens.size(), part = std::min<size_t>(n, size_t{1} << 18);
  train_crc_ = Crc32c(tokens.data(), part * sizeof(int32_t));
  train_crc_ = Crc32c(tokens.data() + (n - part), part * sizeof(int32_t), train_crc_);
  train_tokens_ = static_cast<int64_t>(n);
}

Checkpointer::Checkpointer(const JobConfig& job, const Layout& layout, int world_rank,
                           Communicator* world, ParamStore* store, const ParamLayout& param_layout)
    : job_(job),
      layout_(layout),
      rank_(world_rank),
      world_(world),
      store_(store),
      params_(param_layout),
      plan_(PlanRank(job.model, layout, world_rank)) {
  data_source_ = Utf8OrMarked(DataSource(job));
  int64_t at = 0;
  for (int s = 0; s < kNumStates; ++s) {
    for (const Piece& p : plan_.writes) {
      snapshot_offset_.push_back(at);
      at += p.region.size();
    }
  }
  // Aligned for O_DIRECT writes of the data section (RankFileWriter::PutImage).
  const size_t bytes = (static_cast<size_t>(at) * sizeof(float) + kDataAlignment - 1) /
                       kDataAlignment * kDataAlignment;
  if (!job.checkpoint.dir.empty()) {  // only a saving run needs the host buffer
    snapshot_.reset(static_cast<char*>(
        std::aligned_alloc(kDataAlignment, std::max<size_t>(bytes, kDataAlignment))));
    snapshot_bytes_ = bytes;
  }
}

Checkpointer::~Checkpointer() {
  // Finish the write in flight so no thread touches snapshot_ after it is gone; an uncommitted
  // step_<N>.tmp directory is never loaded and is removed by the next run.
  // (Not after an abandonment: then they may never complete, and bufs_ is kept below.)
  if (poll_ && !world_->Abandoned()) (void)poll_->Wait(world_->DefaultDeadline());
  if (stop_poll_ && !world_->Abandoned()) (void)stop_poll_->Wait(world_->DefaultDeadline());
  // A vote that timed out (here or before) may still write into its buffer: keep it.
  if (world_ != nullptr && world_->Abandoned()) (void)bufs_.release();
  const bool idle = writer_.WaitIdle(WriterTimeoutMs()).ok();
  (void)committer_.WaitIdle(WriterTimeoutMs());
  // A save the ranks agreed failed (often a full disk): its files go now, not at the next run.
  if (idle && !failed_tmp_.empty()) RemoveRankFiles(failed_tmp_, rank_);
  // A directory this run made and left empty (it failed first, or saved nothing) is not left
  // behind: the lock file goes first, while still held.
  if (made_dir_ && dir_lock_ != nullptr) {
    std::error_code ec;
    bool only_lock = true;
    for (const auto& e : fs::directory_iterator(job_.checkpoint.dir, ec)) {
      only_lock = only_lock && e.path().filename() == kRunLockFile;
    }
    if (!ec && only_lock) {
      ::unlink(JoinPath(job_.checkpoint.dir, kRunLockFile).c_str());
      ::rmdir(job_.checkpoint.dir.c_str());
    }
  }
  dir_lock_.reset();
}

Result<int> Checkpointer::AllMax(int v) {
  if (world_ == nullptr) return v;
  // The buffer is a member: after a timed-out wait the communication thread may still write it.
  // The deadline is the checkpoint's, not the communicator's: ranks reach these votes after
  // local I/O of very different lengths (deleting leftovers, loading, writing).
  bufs_->vote = static_cast<float>(v);
  LOOM_RETURN_IF_ERROR(world_->AllReduceAsync(&bufs_->vote, 1, ReduceOp::kMax)
                           ->Wait(Clock::now() + std::chrono::milliseconds(WriterTimeoutMs())));
  return static_cast<int>(bufs_->vote);
}

proto::CheckpointMetadata Checkpointer::BaseMetadata(int64_t step) const {
  proto::CheckpointMetadata m;
  m.set_step(step);
  proto::Provenance* p = m.mutable_provenance();
  p->set_loom_version(kLoomVersion);
  p->set_saved_at(UtcTimestamp());
  std::error_code ec;
  const fs::path job_path = job_.path.empty() ? fs::path() : fs::absolute(job_.path, ec);
  p->set_job_path(Utf8OrMarked(ec ? job_.path : job_path.string()));
  if (job_.text.size() <= kMaxRecordedJobBytes && IsUtf8(job_.text)) p->set_job_yaml(job_.text);
  for (const std::string& o : job_.overrides) p->add_overrides(Utf8OrMarked(o));
  p->set_train_loss(last_loss_);
  proto::ModelSpec* mo = m.mutable_model();
  mo->set_arch("gpt2");
  mo->set_vocab(job_.model.vocab);
  mo->set_max_seq(job_.model.max_seq);
  mo->set_layers(job_.model.layers);
  mo->set_heads(job_.model.heads);
  mo->set_hidden(job_.model.hidden);
  proto::LayoutSpec* l = m.mutable_saved_layout();
  l->set_tp(layout_.tp);
  l->set_cp(layout_.cp);
  l->set_pp(layout_.pp);
  l->set_vpp(layout_.vpp);
  l->set_dp(layout_.dp);
  l->set_zero(layout_.zero);
  l->set_sp(layout_.sp);
  proto::OptimizerState* o = m.mutable_optimizer();
  const OptimConfig& oc = job_.optim;
  o->set_name("adamw");
  o->set_lr(oc.lr);
  o->set_min_lr(oc.min_lr);
  o->set_beta1(oc.beta1);
  o->set_beta2(oc.beta2);
  o->set_eps(oc.eps);
  o->set_weight_decay(oc.weight_decay);
  o->set_grad_clip(oc.grad_clip);
  o->set_warmup_steps(job_.schedule.warmup_steps);
  o->set_decay_steps(job_.schedule.decay_steps);
  o->set_step_count(store_->optimizer_steps());
  proto::DataState* d = m.mutable_data();
  d->set_seed(job_.seed);
  d->set_seq(job_.data.seq);
  d->set_global_batch(job_.data.global_batch);
  d->set_consumed_samples(stats_.resumed_samples +
                          (step - stats_.resumed_step) * job_.data.global_batch);
  d->set_source(data_source_);
  d->set_train_tokens(train_tokens_);
  d->set_train_sample_crc32c(train_crc_);
  proto::RngState* r = m.mutable_rng();
  r->set_seed(job_.seed);
  r->set_generator("splitmix64-counter (seed, stream, index): the seed is the whole state");
  return m;
}

void Checkpointer::WarnIfShortOfSpace(int64_t start_step) const {
  const CheckpointConfig& c = job_.checkpoint;
  const int64_t steps = job_.steps;
  // The saves from here on: every `every` steps, and the final one unless it is one of them.
  int64_t saves = c.every > 0 ? steps / c.every - start_step / c.every : 0;
  if (c.final && steps > start_step && (c.every == 0 || steps % c.every != 0)) ++saves;
  if (c.keep > 0) {
    // Retention leaves `keep` (the next one is written before the oldest goes), counting those
    // already there, plus the milestones (keep_every), never deleted.
    const int64_t there = static_cast<int64_t>(ListCheckpoints(c.dir).size());
    int64_t milestones = 0;
    if (c.keep_every > 0 && c.every > 0) {
      const int64_t l = std::lcm(c.every, c.keep_every);
      milestones = steps / l - start_step / l;
    }
    saves = std::min(saves, std::max<int64_t>(1, c.keep + 1 - there) + milestones);
  }
  if (saves <= 0) return;
  // 12 bytes per parameter (fp32 weight, Adam m and v); the index (metadata.json) is not counted.
  const double per_save = 12.0 * static_cast<double>(ParamLayout::ForModel(job_.model, 1).total);
  fs::path at = fs::absolute(c.dir);
  std::error_code ec;
  while (!fs::exists(at, ec) && at.has_parent_path() && at != at.parent_path()) {
    at = at.parent_path();  // the directory is made at the first save
  }
  struct statvfs sv {};
  if (::statvfs(at.c_str(), &sv) != 0) return;
  const double free = static_cast<double>(sv.f_bavail) * static_cast<double>(sv.f_frsize);
  if (free >= per_save * static_cast<double>(saves)) return;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "checkpoint.dir %s: %.1f MB free, but this run's saves need about %.1f MB "
                "(%lld checkpoints of %.1f MB at once%s); a save that finds the disk full "
                "fails the job",
                c.dir.c_str(), free / 1e6, per_save * static_cast<double>(saves) / 1e6,
                static_cast<long long>(saves), per_save / 1e6,
                c.keep > 0 ? ": the next one is written before the oldest is deleted"
                           : "; keep is 0, none is deleted");
  LOOM_LOG(WARN, CKPT) << buf;
}

namespace {

// How long a run waits for checkpoint.dir's lock (LOOM_CKPT_LOCK_WAIT_MS): a job restarted at
// once after a failure may find its predecessor's rank 0 still exiting.
std::chrono::milliseconds LockWait() {
  return std::chrono::milliseconds(TunableOr(kCkptLockWaitTunable));
}

}  // namespace

Status Checkpointer::LockDir() {
  if (lock_tried_) return Status::Ok();  // Restore again (the benchmark's loads)
  lock_tried_ = true;
  const std::string& dir = job_.checkpoint.dir;
  const std::string field = CheckpointSetting(job_, "dir");
  const std::string path = JoinPath(dir, kRunLockFile);
  const auto deadline = std::chrono::steady_clock::now() + LockWait();
  bool waiting = false;
  for (;;) {
    Result<bool> made = MakeDirHere(dir, "checkpoint.dir");
    if (!made.ok()) return made.status().WithContext(field);
    made_dir_ = made_dir_ || *made;
    int err = 0;
    Result<FileLock> lock = FileLock::TryLock(path, &err);
    if (lock.ok()) {
      dir_lock_ = std::make_unique<FileLock>(std::move(*lock));
      return Status::Ok();
    }
    if (err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL) {
      LOOM_LOG(WARN, CKPT) << ForUser(lock.status(), LogSubsys::CKPT)
                           << ": this file system has no locks, so a second run in the same "
                              "directory would not be refused";
      return Status::Ok();
    }
    const bool held = err == EAGAIN || err == EACCES;
    if ((!held && err != ENOENT) || std::chrono::steady_clock::now() >= deadline) {
      if (!held) return lock.status().WithContext(field);
      return FailedPrecondition(field + ": '" + dir + "' is in use by another run (it holds " +
                                path + "'s lock; waited " + std::to_string(LockWait().count()) +
                                " ms, LOOM_CKPT_LOCK_WAIT_MS); wait for it to end or choose "
                                "another directory");
    }
    if (held && !waiting) {
      LOOM_LOG(INFO, CKPT) << "waiting for " << path << " (another run holds it)";
      waiting = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void Checkpointer::RemoveLeftovers() const {
  // Temporary directories of saves that never committed (a crash, a kill), and the temporary
  // file of a `latest` or load_origin replacement cut short (WriteFileAtomic's latest.tmp.<pid>:
  // rank 0's committer may be writing it when its writer thread dies): nothing reads them.
  std::error_code ec;
  const std::string latest_tmp = std::string(kLatestFile) + ".tmp.";
  const std::string origin_tmp = std::string(kLoadOriginFile) + ".tmp.";
  for (const auto& e : fs::directory_iterator(job_.checkpoint.dir, ec)) {
    const std::string name = e.path().filename().string();
    if ((name.rfind("step_", 0) == 0 && name.find(".tmp") != std::string::npos) ||
        name == kInitImportDir) {
      LOOM_LOG(INFO, CKPT) << "removing " << e.path().string()
                           << (name == kInitImportDir ? " (an interrupted import)"
                                                      : " (an interrupted save)");
      fs::remove_all(e.path(), ec);
    } else if (name.rfind(latest_tmp, 0) == 0 || name.rfind(origin_tmp, 0) == 0) {
      LOOM_LOG(INFO, CKPT) << "removing " << e.path().string() << " (an interrupted update)";
      fs::remove(e.path(), ec);
    }
  }
}

Status Checkpointer::LoadFrom(const std::string& dir, LoadKind kind, int64_t* step) {
  const bool weights_only = kind == LoadKind::kWeightsOnly;
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::Open(dir));
  const proto::CheckpointMetadata& meta = reader->meta();
  const std::string path = JoinPath(dir, kMetadataFile);
  const proto::ModelSpec& mo = meta.model();
  const proto::LayoutSpec& sl = meta.saved_layout();
  Layout saved;
  saved.tp = sl.tp();
  saved.cp = std::max(1, sl.cp());  // absent in some test-written files
  saved.pp = sl.pp();
  saved.vpp = std::max(1, sl.vpp());
  saved.dp = sl.dp();
  saved.zero = sl.zero();
  saved.sp = sl.sp();
  stats_.resumed_layout = saved.ToString();
  const std::pair<const char*, std::pair<int64_t, int64_t>> fields[] = {
      {"vocab", {mo.vocab(), job_.model.vocab}},    {"max_seq", {mo.max_seq(), job_.model.max_seq}},
      {"layers", {mo.layers(), job_.model.layers}}, {"heads", {mo.heads(), job_.model.heads}},
      {"hidden", {mo.hidden(), job_.model.hidden}},
  };
  for (const auto& [name, v] : fields) {
    if (v.first != v.second) {
      return DataLoss(path + ": field 'model." + name + "': the checkpoint has " +
                      std::to_string(v.first) + ", the job's model has " +
                      std::to_string(v.second) + " (a checkpoint of another model)");
    }
  }
  // Weights (with or without the position): the master weights; the AdamW moments keep their
  // initial zeros.
  const int states = kind == LoadKind::kEverything ? kNumStates : 1;
  static_assert(static_cast<int>(StateKind::kParam) == 0);
  for (const ParamInfo& p : ParamLayout::ForModel(job_.model, 1).params) {
    for (int s = 0; s < states; ++s) {
      const proto::TensorEntry* t = reader->Find(p.name, static_cast<StateKind>(s));
      if (t == nullptr) continue;  // reported, with its chunks, by the reads below
      const std::vector<int64_t> shape(t->shape().begin(), t->shape().end());
      if (shape != std::vector<int64_t>(p.global_shape.begin(), p.global_shape.end())) {
        return DataLoss(path + ": tensor '" + p.name + "' state '" + t->state() +
                        "': field 'shape' does not match the job's model");
      }
    }
  }
  LOOM_RETURN_IF_ERROR(store_->Quiesce());
  std::vector<Piece> pieces;
  for (int s = 0; s < states; ++s) {
    const StateKind state = static_cast<StateKind>(s);
    for (int b = 0; b < params_.num_buckets(); ++b) {
      int64_t lo = 0, hi = 0;
      float* base = store_->StateData(state, b, &lo, &hi);
      const int64_t first = params_.buckets[b].first, size = params_.buckets[b].second - first;
      pieces.clear();
      MapBucketRange(params_, b, plan_.tp_rank, lo, std::min(hi, size), false, &pieces);
      for (const Piece& p : pieces) {
        const std::string& name = params_.params[static_cast<size_t>(p.param)].name;
        LOOM_RETURN_IF_ERROR(reader->Read(name, state, p.region, base + (p.local - first - lo)));
      }
    }
  }
  if (kind == LoadKind::kEverything) store_->set_optimizer_steps(meta.optimizer().step_count());
  // A save before any step of this run (the final save of a run already at its last step)
  // records the loss the checkpoint recorded.
  if (!weights_only && meta.has_provenance() && !meta.provenance().job_path().empty()) {
    last_loss_ = meta.provenance().train_loss();
  }
  store_->StateLoaded();
  *step = meta.step();
  // An imported checkpoint has weights and nothing of a run: no settings to compare. Loading it
  // is starting from its weights, which is what init_from says.
  if (!weights_only && IsImportedCheckpoint(meta)) {
    loaded_samples_ = 0;
    if (rank_ == 0) {
      LOOM_LOG(INFO, CKPT) << dir << " was imported (weights only, no training state): "
                           << "training starts at step 1 with the job's settings, as with "
                              "--init-from";
    }
  } else if (!weights_only) {
    const proto::DataState& d = meta.data();
    if (d.consumed_samples() < 0) {
      return DataLoss(path + ": field 'data.consumed_samples': expected 0 or more, got " +
                      std::to_string(d.consumed_samples()));
    }
    loaded_samples_ = d.consumed_samples();
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
    if (rank_ == 0 && !changed.empty()) {
      LOOM_LOG(WARN, CKPT) << path << ": the optimizer settings changed (" << changed << "): step "
                           << meta.step() + 1 << " on follows the job's schedule and settings";
    }
    if (rank_ == 0 && (d.seed() != job_.seed || d.seq() != job_.data.seq)) {
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
    const std::string& source = data_source_;
    const bool other_data =
        d.train_tokens() > 0 && train_tokens_ > 0 &&
        (d.train_tokens() != train_tokens_ || d.train_sample_crc32c() != train_crc_);
    if (rank_ == 0 && !d.source().empty() && (other_data || d.source() != source)) {
      std::ostringstream what;
      what << d.source() << " (" << d.train_tokens() << " training tokens) -> " << source << " ("
           << train_tokens_ << ")";
      if (other_data) {
        LOOM_LOG(WARN, CKPT) << path << ": the training data changed (" << what.str()
                             << "): the sample stream continues after the " << d.consumed_samples()
                             << " samples consumed, drawn from the new data";
      } else {
        LOOM_LOG(INFO, CKPT) << path << ": the training data is read from another path ("
                             << what.str() << ", the same size and sampled checksum)";
      }
    }
    if (rank_ == 0 && d.global_batch() != job_.data.global_batch && d.seed() == job_.seed &&
        d.seq() == job_.data.seq) {
      LOOM_LOG(INFO, CKPT) << path << ": global_batch " << d.global_batch() << " -> "
                           << job_.data.global_batch << ": the data continues after the "
                           << d.consumed_samples() << " samples consumed";
    }
  }
  return Status::Ok();
}

Result<std::vector<int64_t>> Checkpointer::Candidates(const std::string& source, bool required,
                                                      const std::string& where) {
  // The candidates, newest first, as world rank 0 sees them: every rank tries the same steps in
  // the same order even if its view of the directory differs (a rank that cannot read one
  // refuses it, and all fall back together).
  // Only rank 0 looks, and a failure there still goes through the broadcast: the other ranks are
  // waiting in it.
  std::vector<int64_t> steps;
  Status listed;
  if (rank_ == 0 && IsTemporaryName(source)) {
    listed = CheckNotTemporary(source).WithContext(where);
  } else if (rank_ == 0 && IsStepDir(source)) {
    Result<proto::CheckpointMetadata> m = ReadMetadata(source);
    if (m.ok()) steps.push_back(m->step());
    if (!m.ok()) listed = m.status();
  } else if (rank_ == 0) {
    for (const auto& [step, dir] : ListCheckpoints(source)) steps.push_back(step);
  }
  LOOM_RETURN_IF_ERROR(AgreeOnSteps(&steps, listed));
  if (steps.empty() && required) {
    // Weights from elsewhere (a Hugging Face file or directory, an export) are not a checkpoint
    // yet: say how to make one.
    const bool weights = HoldsWeights(source);
    return NotFound(
        where + ": no checkpoint in '" + source + "' (expected a step directory with " +
        kMetadataFile + " or a directory holding step_<N> ones)" +
        (weights ? "; for weights in a safetensors file, make a checkpoint first: loom ckpt "
                   "import FILE OUT, then use OUT"
                 : ""));
  }
  return steps;
}

Result<int64_t> Checkpointer::LoadNewest(const std::string& source,
                                         const std::vector<int64_t>& steps,
                                         const std::string& where, LoadKind kind) {
  std::error_code ec;
  const std::string root = RootOf(source);
  // A step directory is loaded as named, whatever its name (a copy such as `final/` holds the
  // step its metadata says; a root's step_<N> directories are found by their steps).
  const bool step_dir = IsStepDir(source);
  auto dir_of = [&](int64_t step) { return step_dir ? source : JoinPath(root, StepDirName(step)); };
  const bool weights_only = kind == LoadKind::kWeightsOnly;
  // Resuming the run that saves into checkpoint.dir: its later saves replace what follows.
  const bool same_root = !weights_only && !job_.checkpoint.dir.empty() &&
                         fs::equivalent(root, job_.checkpoint.dir, ec);
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string dir = dir_of(steps[i]);
    int64_t step = 0;
    Status st = LoadFrom(dir, kind, &step);
    LOOM_ASSIGN_OR_RETURN(int failed, AllMax(st.ok() ? 0 : 1));
    if (failed == 0) {
      if (weights_only) {
        stats_.initialized_from = dir;
        if (rank_ == 0) {
          LOOM_LOG(INFO, CKPT) << "initialised from "
                               << (imported_from_.empty() ? dir : imported_from_) << " (step "
                               << step
                               << "): model weights only; the step, data position, LR schedule "
                                  "and optimizer state start fresh";
        }
        return int64_t{0};
      }
      stats_.resumed_step = step;
      stats_.resumed_samples = loaded_samples_;
      stats_.resumed_from = dir;
      stats_.optimizer_fresh = kind == LoadKind::kNoOptimizer;
      last_started_ = same_root ? step : -1;
      Status aside;
      if (rank_ == 0) {
        LOOM_LOG(INFO, CKPT) << "resumed from " << dir << " (step " << step << ")"
                             << (stats_.optimizer_fresh
                                     ? ": without its optimizer state (load_optimizer: false); "
                                       "the AdamW moments and step count start fresh"
                                     : "");
        // `latest` edited to go back (as DeepSpeed's and Megatron's tracker files are) is not
        // how Loom chooses: it resumes the newest complete checkpoint. Say so, and how.
        const std::string latest = step_dir ? "" : ReadLatest(root);
        if (i == 0 && !latest.empty() && latest != StepDirName(step) &&
            fs::is_directory(JoinPath(root, latest), ec)) {
          LOOM_LOG(WARN, CKPT) << JoinPath(root, kLatestFile) << " names " << latest
                               << ", not the newest complete checkpoint (a save cut short "
                                  "before updating it, or it was edited): resumed from "
                               << dir << "; to go back to " << latest << ": --load "
                               << JoinPath(root, latest);
        }
        // Checkpoints newer than this one belong to a run that is not continued (or were
        // refused): keep them, but where they can neither be loaded nor replaced piecemeal.
        if (same_root) {
          aside = SetAsideNewer(root, step, std::vector<int64_t>(steps.begin(), steps.begin() + i));
        }
      }
      if (same_root) {
        LOOM_ASSIGN_OR_RETURN(int aside_failed, AllMax(aside.ok() ? 0 : 1));
        if (!aside.ok()) return aside;
        if (aside_failed != 0) {
          return FailedPrecondition("world rank 0 could not set aside the checkpoints newer than " +
                                    dir + " (its error names them)");
        }
      }
      return step;
    }
    if (!st.ok()) {
      LOOM_LOG(ERROR, CKPT) << "checkpoint " << dir << " refused: " << ForUser(st, LogSubsys::CKPT);
    }
    if (rank_ == 0) {
      LOOM_LOG(WARN, CKPT) << "checkpoint " << dir << " cannot be loaded"
                           << (i + 1 < steps.size()
                                   ? "; falling back to the previous one, " + dir_of(steps[i + 1])
                                   : std::string("; no older checkpoint left"));
    }
  }
  std::string tried;
  for (int64_t s : steps) tried += (tried.empty() ? "" : ", ") + dir_of(s);
  return DataLoss(where + ": no valid checkpoint in '" + source + "' (tried " + tried +
                  "; the reasons are logged above)");
}

Result<int64_t> Checkpointer::Restore() {
  const CheckpointIoScope io;
  const CheckpointConfig& c = job_.checkpoint;
  // Fault injection for the tests: a slow file system (LOOM_FAULT_CKPT_SLOW_MS before loading).
  if (const char* slow = std::getenv("LOOM_FAULT_CKPT_SLOW_MS");
      slow != nullptr && !c.dir.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(slow)));
  }
  if (!c.dir.empty()) {
    // One run at a time in a directory: a second one (a requeued job started while the first
    // still runs, the same command in another terminal) would delete the first's save in
    // progress as a leftover and its checkpoints by retention. Rank 0 holds the directory's lock
    // for the whole run.
    Status locked;
    if (rank_ == 0) {
      // Not inside a checkpoint (--checkpoint-dir mixed up with --load: the new run's files and
      // lock would land in a step directory, and go when retention deletes it).
      locked = CheckOutsideCheckpoints(c.dir, "", CheckpointSetting(job_, "dir"));
      if (locked.ok() && !c.export_path.empty()) locked = CheckExportDestination(job_);
      if (locked.ok()) locked = LockDir();
      if (locked.ok()) RemoveLeftovers();
    }
    // Nobody writes before the leftovers are gone; every rank stops if the lock was refused.
    LOOM_ASSIGN_OR_RETURN(int refused, AllMax(locked.ok() ? 0 : 1));
    LOOM_RETURN_IF_ERROR(locked);
    if (refused != 0) {
      return FailedPrecondition(CheckpointSetting(job_, "dir") + ": world rank 0 could not " +
                                "use '" + c.dir + "' (see its error)");
    }
  }
  std::string source = c.load.empty() ? c.dir : c.load;
  source = NormalPath(source);  // "ck/step_6/" as named
  bool explicit_load = !c.load.empty();
  const std::string origin = explicit_load ? CanonicalPath(c.load) : std::string();
  if (explicit_load && c.resume && !c.dir.empty()) {
    // Restarted with the same checkpoint.load (a requeue, a preemption, the same command again):
    // checkpoint.dir holds the run that started from it, and is continued; going back to the
    // loaded checkpoint would throw that run's progress away.
    int continued = rank_ == 0 && ContinuesLoad(c.dir, c.load) ? 1 : 0;
    LOOM_ASSIGN_OR_RETURN(continued, AllMax(continued));
    if (continued != 0) {
      if (rank_ == 0) {
        LOOM_LOG(WARN, CKPT) << "checkpoint.load " << c.load << " was resumed before; " << c.dir
                             << " holds that run's checkpoints: continuing from them (to go "
                                "back to the loaded step, move them out of "
                             << c.dir << ")";
      }
      source = c.dir;
      explicit_load = false;
    }
  }
  const std::string where = CheckpointSetting(job_, explicit_load ? "load" : "dir");
  std::vector<int64_t> steps;
  if (c.resume && !source.empty()) {
    LOOM_ASSIGN_OR_RETURN(steps, Candidates(source, explicit_load, where));
  }
  // Saving into a directory that already holds other checkpoints would mix two runs.
  std::error_code ec;
  const std::string root = RootOf(source);
  auto existing = c.dir.empty() ? decltype(ListCheckpoints(""))() : ListCheckpoints(c.dir);
  const bool same_root = !explicit_load || fs::equivalent(root, c.dir, ec);
  if (!existing.empty() && (steps.empty() || !same_root)) {
    return FailedPrecondition(
        CheckpointSetting(job_, "dir") + ": '" + c.dir + "' already holds checkpoints (newest: " +
        existing.front().second + ")" + (c.resume ? " of another run" : "") + "; " +
        (c.resume ? (c.load_from_flag ? "resume from it (drop --load)"
                                      : "resume from it (leave checkpoint.load unset)")
                  : (c.resume_from_flag ? "drop --no-resume to continue it"
                                        : "set checkpoint.resume: true to continue it")) +
        ", remove them, or choose another directory");
  }
  // A run that does not continue checkpoint.dir's own checkpoints (a new run, or one loading
  // from checkpoint.load) must not inherit a record of how an earlier run in it started: that
  // would make a later restart with that load continue this run.
  if (rank_ == 0 && !c.dir.empty() && (steps.empty() || explicit_load)) {
    std::error_code gone;
    fs::remove(JoinPath(c.dir, kLoadOriginFile), gone);
  }
  if (!steps.empty()) {
    // Without the optimizer state only for the checkpoint named by checkpoint.load: once this run
    // has saved, a restart continues its own checkpoints whole (explicit_load is false then).
    const LoadKind kind =
        explicit_load && !c.load_optimizer ? LoadKind::kNoOptimizer : LoadKind::kEverything;
    LOOM_ASSIGN_OR_RETURN(int64_t step, LoadNewest(source, steps, where, kind));
    // Its first save records where this run started (a restart with the same load continues).
    if (!origin.empty()) origin_ = origin;
    return step;
  }
  // Nothing to resume: a new run, from a checkpoint's weights where one is named (fine-tuning).
  if (c.init_from.empty()) return int64_t{0};
  const std::string init_where = CheckpointSetting(job_, "init_from");
  // Weights from elsewhere rather than a checkpoint: imported on the way (rank 0 looks).
  LOOM_ASSIGN_OR_RETURN(int weights, AllMax(rank_ == 0 && HoldsWeights(c.init_from) ? 1 : 0));
  if (weights != 0) return InitFromWeights(init_where);
  LOOM_ASSIGN_OR_RETURN(steps, Candidates(c.init_from, true, init_where));
  return LoadNewest(c.init_from, steps, init_where, LoadKind::kWeightsOnly);
}

Result<int64_t> Checkpointer::InitFromWeights(const std::string& where) {
  const CheckpointConfig& c = job_.checkpoint;
  if (c.dir.empty()) {
    return InvalidArgument(where + ": '" + c.init_from +
                           "' holds weights, not a checkpoint: they are imported into "
                           "checkpoint.dir on the way, so set it (or --checkpoint-dir), or make a "
                           "checkpoint first: loom ckpt import " +
                           c.init_from + " OUT, then use OUT");
  }
  // Under checkpoint.dir, which every rank reads; a *.tmp name, so a crash leaves nothing that
  // RemoveLeftovers does not remove.
  const std::string tmp = JoinPath(c.dir, kInitImportDir);
  Status imported;
  if (rank_ == 0) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    Result<ImportResult> r =
        ImportSafetensors(c.init_from, tmp, job_.model.heads, job_.path + ": field 'model.heads'");
    imported = r.status().WithContext(where);
    // Another model is named here, not by the loader (its errors would name the import).
    auto describe = [](const ModelConfig& m) {
      return "vocab " + std::to_string(m.vocab) + ", max_seq " + std::to_string(m.max_seq) + ", " +
             std::to_string(m.layers) + " layers, " + std::to_string(m.heads) + " heads, hidden " +
             std::to_string(m.hidden);
    };
    if (r.ok() && describe(r->model) != describe(job_.model)) {
      imported =
          InvalidArgument(where + ": '" + c.init_from + "' holds a model of " + describe(r->model) +
                          "; the job's model has " + describe(job_.model));
    }
    if (imported.ok()) {
      LOOM_LOG(INFO, CKPT) << "imported " << c.init_from << " (" << r->tensors
                           << " tensors) to start from its weights";
    } else {
      std::error_code ec;
      fs::remove_all(tmp, ec);
    }
  }
  LOOM_ASSIGN_OR_RETURN(int failed, AllMax(imported.ok() ? 0 : 1));
  if (!imported.ok()) return imported;
  if (failed != 0) {
    return DataLoss(where + ": world rank 0 could not import '" + c.init_from +
                    "' (its error names the file and tensor)");
  }
  const std::string step_dir = JoinPath(tmp, StepDirName(0));
  imported_from_ = c.init_from;
  // Collective, and the same outcome on every rank: all reach the vote below, which removes
  // the import whatever happened.
  Result<std::vector<int64_t>> steps = Candidates(step_dir, true, where);
  Result<int64_t> step = steps.ok() ? LoadNewest(step_dir, *steps, where, LoadKind::kWeightsOnly)
                                    : Result<int64_t>(steps.status());
  stats_.initialized_from = c.init_from;
  // Every rank has read its part (or failed) before the import goes.
  Result<int> done = AllMax(step.ok() ? 0 : 1);
  if (rank_ == 0) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
  }
  LOOM_RETURN_IF_ERROR(done.status());
  return step;
}

Status Checkpointer::AgreeOnSteps(std::vector<int64_t>* steps, const Status& listed) {
  if (world_ == nullptr) return listed;
  // Rank 0's list: its length (-1: rank 0 could not list them), then each step as two floats,
  // step / 2^24 and step % 2^24, each exact (floats hold integers exactly up to 2^24).
  constexpr size_t kMax = 4096;
  constexpr int64_t kHalf = int64_t{1} << 24;
  bufs_->agreed.assign(2 * kMax + 1, 0.0f);
  if (rank_ == 0) {
    const size_t n = std::min(kMax, steps->size());
    bufs_->agreed[0] = listed.ok() ? static_cast<float>(n) : -1.0f;
    for (size_t i = 0; i < n; ++i) {
      bufs_->agreed[2 * i + 1] = static_cast<float>((*steps)[i] / kHalf);
      bufs_->agreed[2 * i + 2] = static_cast<float>((*steps)[i] % kHalf);
    }
  }
  LOOM_RETURN_IF_ERROR(
      world_->BroadcastAsync(bufs_->agreed.data(), static_cast<int64_t>(bufs_->agreed.size()), 0)
          ->Wait(Clock::now() + std::chrono::milliseconds(WriterTimeoutMs())));
  if (bufs_->agreed[0] < 0) {
    return rank_ == 0 ? listed
                      : DataLoss(
                            "world rank 0 could not read the checkpoint to load (its "
                            "error names the file)");
  }
  steps->clear();
  for (size_t i = 0; i < static_cast<size_t>(bufs_->agreed[0]); ++i) {
    steps->push_back(static_cast<int64_t>(bufs_->agreed[2 * i + 1]) * kHalf +
                     static_cast<int64_t>(bufs_->agreed[2 * i + 2]));
  }
  return Status::Ok();
}

Status Checkpointer::SetAsideNewer(const std::string& root, int64_t loaded,
                                   const std::vector<int64_t>& refused) const {
  std::error_code ec;
  bool moved = false;
  for (const auto& [step, dir] : ListCheckpoints(root)) {
    if (step <= loaded) continue;
    const bool was_refused = std::find(refused.begin(), refused.end(), step) != refused.end();
    // Never over an earlier one (the same step may be refused again in a later run).
    std::string aside = dir + (was_refused ? ".refused" : ".abandoned");
    for (int n = 2; fs::exists(aside, ec) && n < 1000; ++n) {
      aside = dir + (was_refused ? ".refused." : ".abandoned.") + std::to_string(n);
    }
    if (::rename(dir.c_str(), aside.c_str()) != 0) {
      // Left in place it would be resumed by the next restart, mixing two runs.
      return ErrnoError("set aside " + dir + " (newer than the checkpoint resumed from, step " +
                            std::to_string(loaded) + ") as " + aside,
                        errno);
    }
    moved = true;
    LOOM_LOG(WARN, CKPT) << "moved " << dir << " to " << aside
                         << (was_refused ? " (it could not be loaded)"
                                         : " (newer than the checkpoint resumed from)");
  }
  LOOM_RETURN_IF_ERROR(FsyncDir(root));
  // `latest` named one of them: it names the resumed checkpoint until the next save.
  if (moved) {
    LOOM_RETURN_IF_ERROR(WriteFileAtomic(JoinPath(root, kLatestFile), StepDirName(loaded) + "\n"));
  }
  return Status::Ok();
}

Status Checkpointer::CopyState(size_t* next, uint64_t end) {
  // The data section of this rank's file is, in file order, each state of each piece: copy
  // pieces until bytes [0, end) of the snapshot hold them.
  const size_t pieces = plan_.writes.size();
  for (; *next < snapshot_offset_.size() &&
         static_cast<uint64_t>(snapshot_offset_[*next]) * sizeof(float) < end;
       ++*next) {
    const StateKind state = static_cast<StateKind>(*next / pieces);
    const Piece& p = plan_.writes[*next % pieces];
    int64_t lo = 0, hi = 0;
    const float* base = store_->StateData(state, p.bucket, &lo, &hi);
    const int64_t off = p.local - params_.buckets[p.bucket].first;
    if (off < lo || off + p.region.size() > hi) {
      return Internal("checkpoint: rank " + std::to_string(rank_) + " does not hold " +
                      StateName(state) + " elements [" + std::to_string(off) + ", " +
                      std::to_string(off + p.region.size()) + ") of bucket " +
                      std::to_string(p.bucket));
    }
    std::memcpy(snapshot_.get() + snapshot_offset_[*next] * sizeof(float), base + (off - lo),
                static_cast<size_t>(p.region.size()) * sizeof(float));
  }
  return Status::Ok();
}

Status Checkpointer::Save(int64_t step) {
  if (!snapshot_) {
    return Internal("checkpoint: out of memory for the " + std::to_string(snapshot_bytes_) +
                    "-byte host buffer of a save");
  }
  const auto t0 = std::chrono::steady_clock::now();
  {
    const CheckpointIoScope io;                     // the previous save may still be writing
    LOOM_RETURN_IF_ERROR(Complete(/*wait=*/true));  // one save in flight at a time
  }
  pending_meta_ = BaseMetadata(step);
  pending_step_ = step;
  last_started_ = step;
  ++stats_.saves;
  {
    std::lock_guard<std::mutex> lock(snapshot_mu_);
    snapshot_taken_ = false;
  }
  const std::string tmp = TempStepDir(job_.checkpoint.dir, step);
  // The writer thread copies the state into the host buffer first (the next optimizer update
  // waits for that copy in BeforeUpdate), then writes it while training continues.
  writer_.Submit([this, tmp] {
    const auto w0 = std::chrono::steady_clock::now();
    auto taken = [this] {
      {
        std::lock_guard<std::mutex> lock(snapshot_mu_);
        snapshot_taken_ = true;
      }
      snapshot_cv_.notify_all();
    };
    Result<std::unique_ptr<RankFileWriter>> w = RankFileWriter::Open(tmp, rank_, plan_);
    if (!w.ok()) {
      taken();  // nothing will be copied: never block the update
      return w.status();
    }
    // Copy part by part; each part is written while the next is copied. Training may change
    // the state once the last piece is copied.
    size_t next = 0;
    const uint64_t total = (*w)->image_bytes();
    Status st = (*w)->StreamImage(snapshot_.get(), [&](uint64_t end) {
      Status copied = CopyState(&next, end);
      if (!copied.ok() || end == total) taken();
      return copied;
    });
    if (total == 0) taken();
    if (!st.ok()) {
      taken();
      return st;
    }
    const double streamed = SecondsSince(w0);
    LOOM_ASSIGN_OR_RETURN(uint64_t bytes, (*w)->Finish());
    stats_.write_s += SecondsSince(w0);
    stats_.bytes += bytes;
    LOOM_LOG(DEBUG, CKPT) << "wrote " << bytes << " bytes of " << tmp << ": copy+write "
                          << streamed * 1e3 << " ms, fsync+index "
                          << (SecondsSince(w0) - streamed) * 1e3 << " ms";
    return Status::Ok();
  });
  if (!job_.checkpoint.async) LOOM_RETURN_IF_ERROR(Complete(/*wait=*/true));
  stats_.save_s += SecondsSince(t0);
  stats_.stall_s += SecondsSince(t0);
  return Status::Ok();
}

Status Checkpointer::BeforeUpdate() {
  const CheckpointIoScope io;  // waiting for the state copy of a save
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(snapshot_mu_);
  const bool taken = snapshot_cv_.wait_for(lock, std::chrono::milliseconds(WriterTimeoutMs()),
                                           [&] { return snapshot_taken_; });
  stats_.copy_wait_s += SecondsSince(t0);
  stats_.stall_s += SecondsSince(t0);
  if (!taken) {
    return DeadlineExceeded("checkpoint step " + std::to_string(pending_step_) +
                            ": the state was not copied within " +
                            std::to_string(WriterTimeoutMs()) + " ms (LOOM_CKPT_TIMEOUT_MS)");
  }
  return Status::Ok();
}

int Checkpointer::LocalFlag() {
  if (!writer_.Idle()) return kWriting;
  for (BackgroundWriter* w : {&writer_, &committer_}) {  // a failed commit fails the next save
    Status st = w->TakeStatus();
    if (!st.ok() && write_error_.ok()) write_error_ = st;
  }
  return write_error_.ok() ? kWritten : kFailed + rank_;  // the maximum names a failing rank
}

Status Checkpointer::Resolve(int all) {
  if (all == kWriting) return Status::Ok();  // vote again after the next step
  const int64_t step = pending_step_;
  pending_step_ = -1;
  if (all >= kFailed) {
    failed_tmp_ = TempStepDir(job_.checkpoint.dir, step);  // the job ends: see the destructor
    Status mine = write_error_;
    write_error_ = Status::Ok();
    if (!mine.ok()) return mine.WithContext("checkpoint step " + std::to_string(step));
    return Internal("checkpoint step " + std::to_string(step) + ": rank " +
                    std::to_string(all - kFailed) + " failed to write its part (see its error)");
  }
  if (rank_ == 0) {  // every part is on disk: commit in the background
    const std::string root = job_.checkpoint.dir, tmp = TempStepDir(root, step);
    const int world = layout_.world();
    const int keep = static_cast<int>(job_.checkpoint.keep);
    const int64_t keep_every = job_.checkpoint.keep_every;
    proto::CheckpointMetadata meta = pending_meta_;
    const ModelConfig model = job_.model;
    // Before this run's first checkpoint appears, where it started from (checkpoint.load), so
    // that every committed checkpoint of it comes with the record.
    const std::string origin = origin_recorded_ ? std::string() : origin_;
    origin_recorded_ = true;
    // On its own thread, so the next save's copy never waits behind a commit or a deletion.
    committer_.Submit([=] {
      const auto c0 = std::chrono::steady_clock::now();
      Status st = origin.empty() ? Status::Ok()
                                 : WriteFileAtomic(JoinPath(root, kLoadOriginFile), origin + "\n");
      if (st.ok()) st = CommitCheckpoint(root, tmp, world, model, meta);
      if (!st.ok()) {
        LOOM_LOG(ERROR, CKPT) << "committing " << JoinPath(root, StepDirName(meta.step()))
                              << " failed: " << ForUser(st, LogSubsys::CKPT);
        return st;
      }
      LOOM_LOG(INFO, CKPT) << "saved " << JoinPath(root, StepDirName(meta.step()));
      LOOM_LOG(DEBUG, CKPT) << "commit took " << SecondsSince(c0) * 1e3 << " ms";
      return Status::Ok();
    });
    committer_.Submit([=] {
      Status st = ApplyRetention(root, keep, keep_every, meta.step());
      if (!st.ok()) {
        LOOM_LOG(WARN, CKPT) << "retention: " << ForUser(st, LogSubsys::CKPT);
      }
      return Status::Ok();  // an old checkpoint left behind is not worth stopping training
    });
  }
  return Status::Ok();
}

Status Checkpointer::Complete(bool wait) {
  if (pending_step_ < 0) return Status::Ok();
  // The vote started after the previous step: every rank has passed that point by now (each
  // step ends with collectives that connect all ranks), so this wait returns at once. Every
  // rank takes the same decision from the same result, at the same step.
  if (poll_) {
    Status st = poll_->Wait(world_->DefaultDeadline());
    LOOM_RETURN_IF_ERROR(st);  // the handle is kept: the destructor waits for it again
    poll_.reset();
    LOOM_RETURN_IF_ERROR(Resolve(static_cast<int>(bufs_->poll)));
    if (pending_step_ < 0) return Status::Ok();
  }
  if (wait) {  // every rank waits for its writer, so the vote can only be written or failed
    Status st = writer_.WaitIdle(WriterTimeoutMs())
                    .WithContext("rank " + std::to_string(rank_) + " writing " +
                                 JoinPath(TempStepDir(job_.checkpoint.dir, pending_step_),
                                          RankFileName(rank_)) +
                                 " (LOOM_CKPT_TIMEOUT_MS)");
    if (!st.ok() && write_error_.ok()) write_error_ = st;  // still vote: the others wait for it
    LOOM_ASSIGN_OR_RETURN(int all, AllMax(st.ok() ? LocalFlag() : kFailed + rank_));
    return Resolve(all);
  }
  if (world_ == nullptr) return Resolve(LocalFlag());
  bufs_->poll = static_cast<float>(LocalFlag());
  poll_ = world_->AllReduceAsync(&bufs_->poll, 1, ReduceOp::kMax);
  return Status::Ok();
}

Status Checkpointer::AfterStep(int64_t step) {
  if (job_.checkpoint.dir.empty()) return Status::Ok();
  const auto t0 = std::chrono::steady_clock::now();
  Status st = Complete(/*wait=*/false);
  stats_.poll_s += SecondsSince(t0);
  stats_.stall_s += SecondsSince(t0);
  LOOM_RETURN_IF_ERROR(st);
  const int64_t every = job_.checkpoint.every;
  if (every > 0 && step % every == 0 && step != last_started_) return Save(step);
  return Status::Ok();
}

Result<int> Checkpointer::StopVote(int signal) {
  if (job_.checkpoint.dir.empty() ||
      (job_.checkpoint.stop_signal == 0 && job_.checkpoint.exit_after_minutes <= 0)) {
    return 0;
  }
  if (world_ == nullptr) return signal;
  int agreed = 0;
  if (stop_poll_) {  // started after the previous step: every rank has passed that point
    Status st = stop_poll_->Wait(world_->DefaultDeadline());
    LOOM_RETURN_IF_ERROR(st.WithContext("stop-signal vote"));  // kept, as poll_
    stop_poll_.reset();
    agreed = static_cast<int>(bufs_->stop);
  }
  if (agreed == 0) {
    bufs_->stop = static_cast<float>(signal);
    stop_poll_ = world_->AllReduceAsync(&bufs_->stop, 1, ReduceOp::kMax);
  }
  return agreed;
}

Status Checkpointer::Finish(int64_t step, bool save) {
  if (job_.checkpoint.dir.empty()) return Status::Ok();
  const CheckpointIoScope io;
  if (stop_poll_) {  // a stop vote in flight: complete it before the votes below
    Status st = stop_poll_->Wait(world_->DefaultDeadline());
    LOOM_RETURN_IF_ERROR(st.WithContext("stop-signal vote"));  // kept, as poll_
    stop_poll_.reset();
  }
  if ((job_.checkpoint.final || save) && step != last_started_) LOOM_RETURN_IF_ERROR(Save(step));
  const auto t0 = std::chrono::steady_clock::now();
  LOOM_RETURN_IF_ERROR(Complete(/*wait=*/true));
  // Rank 0's commit runs on its committer: wait for it and tell every rank how it went.
  Status committed = committer_.WaitIdle(WriterTimeoutMs())
                         .WithContext("rank 0 committing checkpoints under " + job_.checkpoint.dir +
                                      " (LOOM_CKPT_TIMEOUT_MS)");
  if (committed.ok()) committed = committer_.TakeStatus();
  LOOM_ASSIGN_OR_RETURN(int all, AllMax(committed.ok() ? kWritten : kFailed));
  stats_.stall_s += SecondsSince(t0);
  if (!committed.ok()) return committed.WithContext("checkpoint commit");
  if (all != kWritten) return Internal("checkpoint: rank 0 failed to commit (see its error)");
  return Status::Ok();
}

Status Checkpointer::ExportFinal(int64_t step) {
  const CheckpointConfig& c = job_.checkpoint;
  if (c.export_path.empty() || c.dir.empty()) return Status::Ok();
  const CheckpointIoScope io;  // heartbeats say so: the launcher allows the I/O its time
  Status st;
  if (rank_ == 0) {
    RemoveExportLeftovers(c.export_path);  // of an export a crash cut short
    const std::string src = JoinPath(c.dir, StepDirName(step));
    Result<DType> dtype = ParseExportDtype(c.export_dtype, "checkpoint.export_dtype");
    const bool file = ExportsOneFile(c);
    Result<ExportResult> r =
        !dtype.ok() ? Result<ExportResult>(dtype.status())
        : file      ? ExportSafetensors(src, c.export_path, ExportNames::kHuggingFaceGpt2, *dtype)
                    : ExportHuggingFaceDir(src, c.export_path, *dtype);
    if (r.ok()) {
      LOOM_LOG(INFO, CKPT) << "exported " << src << " to " << c.export_path << " ("
                           << (file ? "" : "a Hugging Face model directory, ") << r->tensors
                           << " tensors, " << c.export_dtype << ", Hugging Face GPT-2 names)";
    }
    st = r.status().WithContext(job_.path + ": field 'checkpoint.export'");
  }
  LOOM_ASSIGN_OR_RETURN(int failed, AllMax(st.ok() ? 0 : 1));
  if (!st.ok()) return st;
  if (failed != 0) return Internal("checkpoint.export: world rank 0 failed (see its error)");
  return Status::Ok();
}

}  // namespace loom
