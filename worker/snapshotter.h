// In-memory snapshots from the training loop (docs/SNAPSHOTS.md): every `every` steps each rank
// copies its shard of parameters, AdamW moments and step count, with the step, data position, LR
// schedule and RNG (functions of seed and step), into node-local shared memory through the save
// engine (copied beside compute; the optimizer update waits for the copy), and erasure-codes it
// across its stripe group; a snapshot is committed once every rank replicated it.
//
// Its segments are named by the job's key, the rank's node and the incarnation (epoch); the
// previous incarnation's ones stay until this one has committed a snapshot of its own, so a
// crash during a restore can still be restored from them. A run that finishes removes its
// node's segments of every incarnation; `loom launch` removes what is left of the job.
//
// Thread-safety: one Snapshotter per rank, called from the training thread only; every call but
// BeforeUpdate is collective over the world.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "checkpoint/rank_state.h"
#include "checkpoint/save_engine.h"
#include "checkpoint/shard_plan.h"
#include "comm/backend.h"
#include "fault/snapshot/replicator.h"
#include "fault/snapshot/segment.h"
#include "job/job_config.h"
#include "parallel/process_groups.h"
#include "proto/control.pb.h"
#include "worker/snapshot_sink.h"
#include "worker/step_observer.h"

namespace loom {

class ParamStore;

// What a rank needs to take snapshots: the coordinator's plan and this incarnation.
struct SnapshotSetup {
  proto::SnapshotPlan plan;
  int epoch = 0;
  Backend* backend = nullptr;  // creates the stripe group's communicator (null: one process)
};

// The segment geometry of world rank `rank` of `layout` under RS(k, m) (m = 0: node-local, one
// piece): its image, cut into k pieces of its stripe group's largest image (`group`: its
// members' world ranks; null without erasure coding). The same for the rank that writes it and
// for one that restores from it.
SegmentGeometry SnapshotGeometry(const ModelConfig& model, const Layout& layout, int k, int m,
                                 const std::vector<int>* group, int rank);

// The identity of world rank `rank`'s segment in incarnation `epoch` of `plan`.
SegmentIdentity SnapshotIdentity(const std::string& job_key, const std::vector<std::string>& nodes,
                                 int epoch, int rank);

class Snapshotter : public StepObserver {
 public:
  // Collective over the world: creates this rank's segment (and, with erasure coding, its
  // stripe group's communicator and replicator). `store` and `params` must outlive it.
  static Result<std::unique_ptr<Snapshotter>> Create(const SnapshotSetup& setup,
                                                     const JobConfig& job,
                                                     const ProcessGroups& place, ParamStore* store,
                                                     const ParamLayout& params);
  ~Snapshotter() override;

  // Where the run starts: the step and the samples consumed up to it (snapshots record the
  // data position from them).
  void SetOrigin(int64_t step, int64_t consumed_samples) {
    origin_step_ = step;
    origin_samples_ = consumed_samples;
  }
  // Local, before every optimizer update: the copy of the snapshot in flight must be complete.
  Status BeforeUpdate();
  // From the next step on, a snapshot every `every` steps (0: none). Collective in effect: every
  // rank must change it at the same step (bench/snapshot_bench interleaves settings with it).
  void set_every(int64_t every) { every_ = every; }

  int64_t committed_step() const { return sink_->committed_step(); }
  uint64_t image_bytes() const { return sink_->image_bytes(); }
  std::string Protection() const;  // "RS(2,1) over ucx" / "node-local"
  const SaveStats& stats() const { return engine_->stats(); }
  // Encoding and transfer time of the erasure coding (zero without it).
  ReplicatorStats replication() const {
    return replicator_ ? replicator_->stats() : ReplicatorStats{};
  }

  // StepObserver.
  Status OnStep(const StepEvent& event) override;    // Poll, and a save every `every` steps
  Status OnStop(int64_t step, int reason) override;  // the save completes; the memory goes
  Status OnFinish(int64_t steps) override;  // the last save completes; this node's memory goes
  void OnFail(const Status& status) override;

 private:
  Snapshotter() = default;
  // With erasure coding: the stripe group's communicator and the replicator (collective).
  Status Connect(const SnapshotSetup& setup, const ErasureCode& code,
                 const std::vector<int>& members);
  Status Finish();
  // Removes this rank's segment and its node's of earlier incarnations.
  void RemoveOwn();

  SnapshotSetup setup_;
  JobConfig job_;
  Layout layout_;
  int rank_ = 0;
  std::string node_;
  std::unique_ptr<RankShardPlan> plan_;
  std::unique_ptr<RankState> state_;
  CommPtr group_;  // the stripe group (erasure coding only)
  std::unique_ptr<Segment> segment_;
  std::unique_ptr<Replicator> replicator_;
  std::unique_ptr<SnapshotSink> sink_;
  std::unique_ptr<SaveEngine> engine_;  // last: destroyed first
  int64_t origin_step_ = 0, origin_samples_ = 0;
  int64_t every_ = 1;
  double last_loss_ = 0;
  bool old_removed_ = false;  // the previous incarnations' segments on this node are gone
};

}  // namespace loom
