// Snapshots every K steps through the save engine, into shared memory, erasure-coded.
#include "worker/snapshotter.h"

#include <algorithm>

#include "comm/agree.h"
#include "core/logging.h"
#include "parallel/layout.h"
#include "worker/save_metadata.h"
#include "worker/store_state.h"

namespace loom {
namespace {

std::vector<std::string> Nodes(const proto::SnapshotPlan& p) {
  return {p.rank_node().begin(), p.rank_node().end()};
}

}  // namespace

SegmentGeometry SnapshotGeometry(const ModelConfig& model, const Layout& layout, int k, int m,
                                 const std::vector<int>* group, int rank) {
  SegmentGeometry g;
  g.image_bytes = ImageBytes(PlanRank(model, layout, rank));
  g.k = m > 0 ? k : 1;
  g.m = m;
  if (m == 0 || group == nullptr) {
    g.piece_bytes = PieceBytes(g.image_bytes, 1, kSegmentAlignment);
    return g;
  }
  uint64_t largest = g.image_bytes;
  for (int r : *group) largest = std::max(largest, ImageBytes(PlanRank(model, layout, r)));
  g.piece_bytes = PieceBytes(largest, k);
  return g;
}

SegmentIdentity SnapshotIdentity(const std::string& job_key, const std::vector<std::string>& nodes,
                                 int epoch, int rank) {
  const std::string node = rank < static_cast<int>(nodes.size()) ? nodes[rank] : "local";
  return {job_key, node, epoch, rank};
}

Result<std::unique_ptr<Snapshotter>> Snapshotter::Create(const SnapshotSetup& setup,
                                                         const JobConfig& job,
                                                         const ProcessGroups& place,
                                                         ParamStore* store,
                                                         const ParamLayout& params) {
  std::unique_ptr<Snapshotter> s(new Snapshotter());
  s->setup_ = setup;
  s->job_ = job;
  s->layout_ = place.layout;
  s->rank_ = place.world_rank;
  s->every_ = std::max(1, setup.plan.every());
  const proto::SnapshotPlan& p = setup.plan;
  const std::vector<std::string> nodes = Nodes(p);
  const SegmentIdentity id = SnapshotIdentity(p.job_key(), nodes, setup.epoch, s->rank_);
  s->node_ = id.node;
  s->plan_ = std::make_unique<RankShardPlan>(PlanRank(job.model, place.layout, s->rank_));
  s->state_ = std::make_unique<StoreState>(store);
  const ErasureCode code{p.m() > 0 ? p.k() : 1, p.m()};
  std::vector<int> members;
  for (const auto& grp : p.groups()) {
    if (std::find(grp.ranks().begin(), grp.ranks().end(), s->rank_) != grp.ranks().end()) {
      members.assign(grp.ranks().begin(), grp.ranks().end());
    }
  }
  if (code.m > 0 && members.empty()) {
    return InvalidArgument("snapshot plan: world rank " + std::to_string(s->rank_) +
                           " is in no stripe group");
  }
  const SegmentGeometry g = SnapshotGeometry(job.model, place.layout, code.k, code.m,
                                             members.empty() ? nullptr : &members, s->rank_);
  // Every rank learns whether every segment could be made (a full /dev/shm on one node) before
  // any of them goes on to the collective set-up.
  Result<Segment> seg = Segment::Create(id, g);
  LOOM_RETURN_IF_ERROR(AgreeStatus(place.world.get(), seg.status(), "making snapshot segments",
                                   place.world ? place.world->DefaultDeadline() : Deadline{}));
  s->segment_ = std::make_unique<Segment>(std::move(*seg));
  Status st = s->Connect(setup, code, members);
  if (!st.ok()) {
    (void)s->segment_->Unlink();  // nothing will ever restore from it
    return st;
  }
  s->sink_ = std::make_unique<SnapshotSink>(s->segment_.get(), s->replicator_.get(), s->rank_);
  SaveEngineOptions eo;
  eo.world_rank = s->rank_;
  eo.world = place.world.get();
  s->engine_ = std::make_unique<SaveEngine>(*s->plan_, params, s->state_.get(), s->sink_.get(), eo);
  if (s->rank_ == 0) {
    LOOM_LOG(INFO, SNAP) << "in-memory snapshots every " << p.every() << " step"
                         << (p.every() == 1 ? "" : "s") << ", " << s->Protection() << ", "
                         << g.image_bytes << " bytes per image on rank 0 (/dev/shm/" << id.job
                         << "...)";
  }
  return s;
}

Snapshotter::~Snapshotter() = default;

Status Snapshotter::Connect(const SnapshotSetup& setup, const ErasureCode& code,
                            const std::vector<int>& members) {
  if (code.m == 0) return Status::Ok();
  if (setup.backend == nullptr) return InvalidArgument("snapshot: erasure coding needs ranks");
  LOOM_ASSIGN_OR_RETURN(group_, setup.backend->CreateGroup("snapshot", members));
  LOOM_ASSIGN_OR_RETURN(BulkKind kind, SnapshotTransportKind());
  LOOM_ASSIGN_OR_RETURN(replicator_, Replicator::Create(segment_.get(), group_.get(), code, kind));
  return Status::Ok();
}

std::string Snapshotter::Protection() const {
  if (!replicator_) return "node-local";
  return "RS(" + std::to_string(setup_.plan.k()) + "," + std::to_string(setup_.plan.m()) +
         ") over " + replicator_->transport();
}

Status Snapshotter::BeforeUpdate() {
  return engine_->BeforeUpdate();
}

Status Snapshotter::OnStep(const StepEvent& event) {
  last_loss_ = event.stats.loss;
  LOOM_RETURN_IF_ERROR(engine_->Poll());
  if (!old_removed_ && committed_step() > 0) {
    // This incarnation has a snapshot of its own: the previous ones' segments of this node can
    // go (one rank per segment: each removes its own node's of every earlier epoch).
    old_removed_ = true;
    for (int e = 0; e < setup_.epoch; ++e) {
      (void)RemoveSegments(NodeSegmentPrefix(setup_.plan.job_key(), node_) + "e" +
                           std::to_string(e) + "-");
    }
  }
  if (every_ <= 0 || event.step % every_ != 0 || event.step == event.steps) return Status::Ok();
  return engine_->Save(event.step, [&, step = event.step] {
    SavePoint at;
    at.step = step;
    at.optimizer_steps = state_->optimizer_steps();
    at.consumed_samples = origin_samples_ + (step - origin_step_) * job_.data.global_batch;
    at.loss = last_loss_;
    return SaveMetadata(job_, layout_, at, TrainDataOf(job_));
  });
}

Status Snapshotter::Finish() {
  return engine_->Finish();
}

Status Snapshotter::OnStop(int64_t, int) {
  // Stopped after a checkpoint (a signal, the time limit): the next launch starts from that
  // checkpoint under a new key, so nothing can restore these.
  LOOM_RETURN_IF_ERROR(Finish());
  RemoveOwn();
  return Status::Ok();
}

void Snapshotter::RemoveOwn() {
  (void)segment_->Unlink();
  for (int e = 0; e < setup_.epoch; ++e) {
    (void)RemoveSegments(NodeSegmentPrefix(setup_.plan.job_key(), node_) + "e" + std::to_string(e) +
                         "-");
  }
}

Status Snapshotter::OnFinish(int64_t) {
  LOOM_RETURN_IF_ERROR(Finish());
  // The run is complete: its snapshots are of no more use. Each rank removes its own segment;
  // the node's older incarnations' too.
  RemoveOwn();
  return Status::Ok();
}

void Snapshotter::OnFail(const Status&) {
  // The snapshots stay in shared memory: the supervisor restarts from them.
}

}  // namespace loom
