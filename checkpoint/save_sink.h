// Where the save engine (checkpoint/save_engine.h) puts one rank's state, and what makes a save
// committed. The engine owns the timing — copy beside compute, the per-step vote, failure at the
// next step boundary, one save at a time — and calls a sink for the storage, so universal
// checkpoints and in-memory snapshots share one engine with different sinks:
//
//   FileSink (checkpoint/file_sink.h): each rank streams its image into its data file in
//     <root>/step_<N>.tmp/ and fsyncs it with its index fragment; world rank 0 alone commits
//     (metadata last, rename, `latest`, retention).
//   The in-memory snapshots' sink (worker/snapshot_sink.h, docs/SNAPSHOTS.md): Begin returns
//     the slot of the rank's POSIX shared-memory segment that does not hold the previous
//     snapshot, so the engine's copy IS the store (Store just calls fill up to the end; the
//     memory outlives a crashed process) and Begin keeps the save's description with it; Seal
//     records the pieces' digests; Replicate erasure-codes them over the rank's stripe group and
//     returns once every fragment this rank sent is acknowledged, so the vote's "every rank
//     written" means every fragment of every rank is; every rank commits its own slot
//     (CommitsHere). A fragment that fails or times out fails Replicate: the save fails at the
//     next step boundary like a failed write, and the previous snapshot stays.
//
// The snapshots' storage (segments, RS coding, the fragment transport) lives in fault/ and comm/,
// and their sink in worker/ (which may use both), as worker/store_state.h adapts the parameter
// store to RankState. One engine drives one sink: a run with snapshots and checkpoints has two
// engines (each its own threads and per-step vote), and the optimizer update waits for both
// copies.
//
// Thread-safety: the engine calls CanSave, Discard and the names from the training thread,
// Begin/Store/Seal/Replicate from its writer thread (one save at a time), Commit from its
// committer thread (in save order, one at a time). A sink must outlive its engine.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "proto/checkpoint.pb.h"

namespace loom {

// Makes bytes [0, end) of the image valid (the engine copies the state in); called with
// increasing `end`.
using FillImage = std::function<Status(uint64_t end)>;

class SaveSink {
 public:
  virtual ~SaveSink() = default;

  // Training thread, as a save starts: an error fails that save at once (e.g. no memory for the
  // image).
  virtual Status CanSave() const = 0;

  // Writer thread, per save, in this order; an error ends the save (this rank votes "failed"):
  // Prepares this rank's part of save `meta.step()` and returns the sink's memory the image is
  // copied into: ImageBytes(plan) bytes (checkpoint/save_engine.h), aligned to kDataAlignment,
  // left alone by the sink until Seal returns. `meta` describes the save (as Commit gets it), for
  // a sink that keeps the description with the part (snapshots: a restore needs it before any
  // commit).
  virtual Result<char*> Begin(const proto::CheckpointMetadata& meta) = 0;
  // Stores the image while the engine produces it: calls fill(end) with increasing `end` up to
  // the image size, storing each part as soon as it is filled. Returns fill's first error.
  virtual Status Store(const FillImage& fill) = 0;
  // Makes this rank's part durable. Returns its bytes of tensor data.
  virtual Result<uint64_t> Seal() = 0;
  // Copies this rank's part beyond this rank before it votes "written" (an erasure-coded sink:
  // encode, transfer, wait for every fragment's acknowledgement). Default: nothing.
  virtual Status Replicate() { return Status::Ok(); }

  // Whether this rank runs Commit (files: world rank 0 alone; shared memory: every rank).
  virtual bool CommitsHere() const = 0;
  // Committer thread, once every rank voted its part of save `meta.step()` written: makes the
  // save the committed one. `meta` describes it (step, model, layout, optimizer, data position,
  // RNG, provenance). The engine reports an error to every rank at the next save or Finish.
  virtual Status Commit(const proto::CheckpointMetadata& meta) = 0;
  // Training thread, after the ranks agreed save `step` failed and this rank's writer is idle:
  // removes this rank's part (a full disk gets its space back at once).
  virtual void Discard(int64_t step) = 0;

  // For messages: this rank's part of save `step` ("ck/step_00000010.tmp/rank_00001.safetensors")
  // and what Commit writes ("checkpoints under ck").
  virtual std::string PartName(int64_t step) const = 0;
  virtual std::string CommitName() const = 0;
  // What one save is called in messages ("checkpoint step 10: ...").
  virtual std::string SaveNoun() const { return "checkpoint"; }
};

}  // namespace loom
