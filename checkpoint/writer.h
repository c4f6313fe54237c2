// Writing a universal checkpoint: each rank writes its pieces (checkpoint/shard_plan.h) into one
// data file in the safetensors layout plus an index fragment, both fsynced, in a temporary step
// directory; one process then commits: merges the fragments into metadata.json (written last),
// renames the directory into place, replaces `latest` and applies retention.
//
// Crash points (core/fault_point.h, FaultSite::kCheckpointCrashPoint) sit inside data writes,
// after fsyncs, before and after each rename: the crash-safety test kills a rank at one of them
// (LOOM_FAULT_CKPT_KILL, LOOM_FAULT_CKPT_TRACE: fault/inject.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/direct_writes.h"
#include "checkpoint/format.h"
#include "checkpoint/shard_plan.h"
#include "core/file_util.h"
#include "core/status.h"
#include "model/config.h"

namespace loom {

// Supplies the elements of plan.writes[piece] for `state`: returns a pointer to region.size()
// floats (into its own storage or into `scratch`).
using PieceSource =
    std::function<Result<const float*>(StateKind state, size_t piece, std::vector<float>* scratch)>;

// False when LOOM_CKPT_DIRECT_IO=0: the checkpoint's data files are then written and (by the
// offline tool) read through the page cache, without O_DIRECT (default true).
bool CheckpointDirectIo();

// The temporary directory a save of `step` writes into.
std::string TempStepDir(const std::string& root, int64_t step);

// One rank's data file (safetensors layout: header, then for each state, each of plan.writes in
// order) and its index fragment. Every piece's place follows from the plan alone, so pieces may
// be put in any order (the offline resharder fills many ranks' files tensor by tensor).
// Not thread-safe; the plan must outlive the writer.
class RankFileWriter {
 public:
  // Creates `tmp_dir` if needed and the data file, and writes its header.
  static Result<std::unique_ptr<RankFileWriter>> Open(const std::string& tmp_dir, int rank,
                                                      const RankShardPlan& plan);
  ~RankFileWriter();  // closes the file if Finish was not reached (an error path)
  // Writes piece `k` of plan.writes for `state` (region.size() floats) and records its chunk.
  Status Put(StateKind state, size_t k, const float* data);
  // The same when the piece's bytes are scattered: `parts` (pointer, bytes) in order, written
  // with one vectored write, no gathering copy.
  Status PutParts(StateKind state, size_t k,
                  const std::vector<std::pair<const char*, size_t>>& parts);
  // Writes every piece at once from `image`: the whole data section in file order (for each
  // state, each of plan.writes; image_bytes() bytes), aligned to kDataAlignment. The aligned
  // bulk is written with O_DIRECT where the file system allows it.
  Status PutImage(const char* image);
  // PutImage while the image is being produced: fill(end) must make bytes [0, end) of the image
  // valid (called on this thread with increasing `end`, ending at image_bytes()); each part is
  // written on a second thread as soon as it is filled. A fill error stops the writing.
  Status StreamImage(const char* image, const std::function<Status(uint64_t end)>& fill);
  uint64_t image_bytes() const { return data_bytes_; }
  // From now on, pieces put in file order are gathered into buffers of `pool` that its I/O
  // threads write with O_DIRECT each time one is full (see checkpoint/direct_writes.h for why).
  // A piece put out of order ends the staging (flushed, then buffered writes). Does nothing
  // where O_DIRECT is unavailable or turned off (LOOM_CKPT_DIRECT_IO=0), after a piece was put,
  // or when the pool has no free buffer. The pool must outlive the writer.
  void EnableStaging(DirectWritePool* pool);
  // Checks every piece was put, fsyncs the data file, then writes the index fragment
  // atomically. Returns the tensor bytes written. With `fragment`, the index fragment is moved
  // there instead of written (one process writes every rank's file and commits them itself: the
  // offline resharder).
  Result<uint64_t> Finish(proto::CheckpointMetadata* fragment = nullptr);

 private:
  RankFileWriter() = default;
  // The chunk entry of piece `k` of `state` with its block CRCs.
  void Record(StateKind state, size_t k, std::vector<uint32_t> crcs);
  std::string tmp_dir_, file_, path_;
  int rank_ = 0, fd_ = -1;
  const RankShardPlan* plan_ = nullptr;
  std::vector<uint64_t> offset_;  // per (state * pieces + k): byte offset in the file
  std::vector<bool> done_;
  uint64_t file_bytes_ = 0, data_bytes_ = 0;
  static constexpr uint64_t kWritebackBytes = 8 << 20;
  uint64_t unflushed_ = 0;  // bytes put since writeback was last started
  proto::CheckpointMetadata fragment_;
  // Staged output (EnableStaging): bytes [stage_at_, stage_at_ + stage_len_) of the file are in
  // stage_ (a buffer of pool_), not yet written.
  Status Emit(uint64_t at, const std::vector<std::pair<const char*, size_t>>& parts);
  Status EndStaging();            // writes what is staged, waits for the queued writes
  void StartWriteback(size_t n);  // buffered writes: starts writeback every kWritebackBytes
  DirectWritePool* pool_ = nullptr;
  DirectWritePool::File direct_;
  char* stage_ = nullptr;
  size_t stage_len_ = 0;
  uint64_t stage_at_ = 0;
};

// Writes world rank `rank`'s data file and index fragment into `tmp_dir` (created if needed),
// pieces in file order, and fsyncs them. Returns the bytes of tensor data written.
Result<uint64_t> WriteRankFiles(const std::string& tmp_dir, int rank, const RankShardPlan& plan,
                                const PieceSource& source);

// After a save that will not be committed: removes rank `rank`'s data file and index fragment from
// `tmp_dir`, then `tmp_dir` itself if nothing else is left in it (the last rank to clean up
// removes it). Frees the space at once (a full disk) rather than at the next run's start.
void RemoveRankFiles(const std::string& tmp_dir, int rank);

// The output root of a tool that writes one new checkpoint (loom ckpt reshard, import): made if
// absent, locked (flock) until this is destroyed, and holding no checkpoint. `reads`: the step
// directory the tool reads ("" none); the root must lie outside it and every checkpoint.
class OutputRoot {
 public:
  static Result<OutputRoot> Open(const std::string& root, const std::string& reads);
  // After a failure: removes what was written for `step` (its temporary and final directory, a
  // `latest` the root did not have before) and the root itself if it was made here and is empty.
  void RemovePartial(int64_t step) const;

 private:
  OutputRoot(std::string root, DirLock lock, bool made_here, bool had_latest)
      : root_(std::move(root)),
        lock_(std::move(lock)),
        made_here_(made_here),
        had_latest_(had_latest) {}
  std::string root_;
  DirLock lock_;
  bool made_here_, had_latest_;
};

// Merges the fragments of ranks 0..world-1 into `base` (which carries everything but tensors and
// files), writes metadata.json, renames tmp_dir to <root>/step_<N> and replaces `latest`.
Status CommitCheckpoint(const std::string& root, const std::string& tmp_dir, int world,
                        const ModelConfig& model, proto::CheckpointMetadata base);
// The same with the fragments already in memory (RankFileWriter::Finish(&fragment)).
Status CommitCheckpoint(const std::string& root, const std::string& tmp_dir,
                        const ModelConfig& model, proto::CheckpointMetadata base,
                        std::vector<proto::CheckpointMetadata> fragments);

// Keeps the newest `keep` checkpoints under `root` (0: all; never one newer than or equal to
// `newest`), and besides them every one whose step is a multiple of `keep_every` (0: none):
// others are renamed to step_<N>.deleting.tmp (no longer checkpoints), then removed, together
// with leftovers of interrupted saves of steps up to `newest`.
Status ApplyRetention(const std::string& root, int keep, int64_t keep_every, int64_t newest);

// A checkpoint crash point of world rank `world_rank` (a fault-injection point).
void CheckpointCrashPoint(int world_rank, const char* where);

}  // namespace loom
