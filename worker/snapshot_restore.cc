// Restoring in-memory snapshots: inventory, choice, rebuild, resharding read.
#include "worker/snapshot_restore.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "checkpoint/chunk_table.h"
#include "checkpoint/format.h"
#include "checkpoint/io_activity.h"
#include "checkpoint/load_state.h"
#include "checkpoint/metadata_specs.h"
#include "checkpoint/reader.h"
#include "checkpoint/save_engine.h"
#include "comm/agree.h"
#include "core/crc32c.h"
#include "core/fault_point.h"
#include "core/logging.h"
#include "fault/erasure/reed_solomon.h"
#include "fault/snapshot/recovery_plan.h"
#include "fault/snapshot/snapshot_view.h"
#include "parallel/message_tags.h"
#include "worker/snapshotter.h"

namespace loom {
namespace {

constexpr int kFragmentTag = kSnapshotRestoreTags.first;
constexpr int kRequestTag = kSnapshotRestoreTags.first + 1;
constexpr int kBytesTag = kSnapshotRestoreTags.first + 2;

// One slot as one node reported it, fixed-size for the all-gather.
struct Record {
  int32_t old_rank, slot, holder, state;
  int64_t step;
  uint64_t image_bytes;
  uint32_t piece_ok, parity_ok;
  int32_t parity_row[kMaxSnapshotM];
  uint32_t crcs[kMaxSnapshotM][kMaxSnapshotK + kMaxSnapshotM];
};

// Restore collectives and transfers meet after local work of very different lengths (one rank
// per node checks the digests of its node's memory; rebuilders decode): the checkpoint I/O
// deadline, not the communication default.
Deadline RestoreDeadline() {
  return Clock::now() + std::chrono::milliseconds(CheckpointTimeoutMs());
}

// Messages of at most this many bytes (MPI counts are ints).
constexpr uint64_t kPart = uint64_t{1} << 30;

// Posts the sends (or receives) of `bytes` at `p` in parts of kPart, matched in order.
void SendParts(Communicator* c, const char* p, uint64_t bytes, int peer, const CallOptions& o,
               std::vector<HandlePtr>* out) {
  for (uint64_t at = 0; at < bytes; at += kPart) {
    const auto n = static_cast<int64_t>(std::min(kPart, bytes - at));
    out->push_back(
        c->SendAsync(ConstCommBuffer::Host(reinterpret_cast<const uint8_t*>(p + at), n), peer, o));
  }
}
void RecvParts(Communicator* c, char* p, uint64_t bytes, int peer, const CallOptions& o,
               std::vector<HandlePtr>* out) {
  for (uint64_t at = 0; at < bytes; at += kPart) {
    const auto n = static_cast<int64_t>(std::min(kPart, bytes - at));
    out->push_back(c->RecvAsync(CommBuffer::Host(reinterpret_cast<uint8_t*>(p + at), n), peer, o));
  }
}

// Waits for every handle, each until its call's deadline, and forgets them (the first error,
// with `what` for context).
Status WaitAndClear(std::vector<HandlePtr>* handles, const std::string& what) {
  Status st = WaitAll(*handles);
  handles->clear();
  return st.ok() ? st : st.WithContext(what);
}

class Restorer {
 public:
  Restorer(const proto::SnapshotPlan& plan, const proto::SnapshotOrigin& origin,
           const JobConfig& job, const ProcessGroups& place)
      : plan_(plan), rec_(origin), job_(job), place_(place) {}

  Result<SnapshotRestore> Run(RankState* state, const ParamLayout& params, int tp_rank);

 private:
  int world() const { return place_.world ? place_.world->size() : 1; }
  int me() const { return place_.world_rank; }
  const std::string& NodeOf(int new_rank) const { return plan_.rank_node(new_rank); }
  const std::string& OldNode(int old_rank) const { return rec_.rank_node(old_rank); }
  // Whether new rank `r` maps old rank `x`'s segment itself (same node).
  bool Maps(int r, int x) const { return NodeOf(r) == OldNode(x); }
  Segment* Mapped(int x) const {
    auto it = segments_.find(x);
    return it == segments_.end() ? nullptr : it->second.get();
  }

  void Setup();
  Status OpenNodeSegments();
  std::string Inventory();
  Result<std::vector<SlotReport>> GatherReports();
  Status Rebuild();
  Result<proto::CheckpointMetadata> Metadata();
  Status Prefetch(CheckpointReader* reader, RankState* state, const ParamLayout& params,
                  int tp_rank);
  // Where old rank x's chosen image lies in this process, or null.
  const char* LocalImage(int x) const;
  int Server(int x) const;

  const proto::SnapshotPlan& plan_;
  const proto::SnapshotOrigin& rec_;
  const JobConfig& job_;
  const ProcessGroups& place_;
  SnapshotOrigin origin_;
  Layout old_layout_;
  std::vector<uint64_t> image_bytes_, piece_bytes_;   // by old rank
  std::map<int, std::unique_ptr<Segment>> segments_;  // old rank -> this node's mapping
  RecoveryChoice choice_;
  std::map<int, std::vector<char>> rebuilt_;  // old rank -> image this rank rebuilt
  std::map<std::tuple<int, uint64_t, uint64_t>, std::vector<char>> fetched_;
  uint64_t bytes_fetched_ = 0;

  friend class SnapshotBytes;
};

// The reader's view of the old images: local mappings, rebuilt buffers, fetched ranges.
class SnapshotBytes : public ByteSource {
 public:
  explicit SnapshotBytes(const Restorer* r) : r_(r) {
    for (int x = 0; x < r->origin_.world; ++x) rank_of_[RankFileName(x)] = x;
  }
  Status Read(const std::string& file, uint64_t offset, uint64_t n, char* dst) override {
    auto it = rank_of_.find(file);
    if (it == rank_of_.end()) return Internal("snapshot restore: no image named " + file);
    const int x = it->second;
    if (const char* img = r_->LocalImage(x)) {
      if (offset + n > r_->image_bytes_[x]) return DataLoss(file + ": read past the image");
      std::memcpy(dst, img + offset, n);
      return Status::Ok();
    }
    auto f = r_->fetched_.find({x, offset, n});
    if (f == r_->fetched_.end()) {
      return Internal("snapshot restore: bytes " + std::to_string(offset) + "+" +
                      std::to_string(n) + " of old rank " + std::to_string(x) +
                      "'s image were not fetched");
    }
    std::memcpy(dst, f->second.data(), n);
    return Status::Ok();
  }

 private:
  const Restorer* r_;
  std::map<std::string, int> rank_of_;
};

void Restorer::Setup() {
  old_layout_ = LayoutOf(rec_.layout());
  origin_.world = old_layout_.world();
  origin_.code = {rec_.m() > 0 ? rec_.k() : 1, rec_.m()};
  for (const auto& g : rec_.groups())
    origin_.groups.emplace_back(g.ranks().begin(), g.ranks().end());
  origin_.rank_node.assign(rec_.rank_node().begin(), rec_.rank_node().end());
  image_bytes_.resize(static_cast<size_t>(origin_.world));
  piece_bytes_.resize(static_cast<size_t>(origin_.world));
  for (int x = 0; x < origin_.world; ++x) {
    const std::vector<int>* group = nullptr;
    for (const auto& g : origin_.groups) {
      if (std::find(g.begin(), g.end(), x) != g.end()) group = &g;
    }
    const SegmentGeometry geo =
        SnapshotGeometry(job_.model, old_layout_, origin_.code.k, origin_.code.m, group, x);
    image_bytes_[x] = geo.image_bytes;
    piece_bytes_[x] = geo.piece_bytes;
  }
}

Status Restorer::OpenNodeSegments() {
  const std::vector<std::string> nodes = origin_.rank_node;
  for (int x = 0; x < origin_.world; ++x) {
    if (OldNode(x) != NodeOf(me())) continue;
    Result<Segment> seg = Segment::Open(SnapshotIdentity(plan_.job_key(), nodes, rec_.epoch(), x));
    if (!seg.ok()) {
      if (seg.status().code() != StatusCode::kNotFound) {
        LOOM_LOG(WARN, SNAP) << ForUser(seg.status(), LogSubsys::SNAP);
      }
      continue;
    }
    segments_[x] = std::make_unique<Segment>(std::move(*seg));
  }
  return Status::Ok();
}

std::string Restorer::Inventory() {
  // One rank per node takes stock (the lowest of the node): checking every digest reads all of
  // the node's snapshot memory once.
  for (int r = 0; r < me(); ++r) {
    if (NodeOf(r) == NodeOf(me())) return "";
  }
  SnapshotView view;
  for (auto& [x, seg] : segments_) view.segments.emplace_back(x, seg.get());
  FaultPoint({FaultSite::kSnapshotRestore, me(), 0, "", &view});  // fault/inject.h
  std::string out;
  for (auto& [x, seg] : segments_) {
    const SegmentGeometry& g = seg->geometry();
    for (int slot = 0; slot < 2; ++slot) {
      const SlotInfo info = seg->ReadSlot(slot);
      if (!info.valid || info.state < SlotState::kSealed) continue;
      Record rec{};
      rec.old_rank = x;
      rec.slot = slot;
      rec.holder = me();
      rec.state = static_cast<int32_t>(info.state);
      rec.step = info.step;
      rec.image_bytes = info.image_bytes;
      for (int t = 0; t < g.k; ++t) rec.piece_ok |= seg->PieceIntact(slot, info, t) ? 1u << t : 0;
      for (int p = 0; p < g.m; ++p) {
        rec.parity_row[p] = info.parities[p].row;
        if (info.parities[p].row < 0) continue;
        rec.parity_ok |= seg->ParityIntact(slot, info, p) ? 1u << p : 0;
        std::copy(info.parities[p].crcs.begin(), info.parities[p].crcs.end(), rec.crcs[p]);
      }
      out.append(reinterpret_cast<const char*>(&rec), sizeof(rec));
    }
  }
  return out;
}

Result<std::vector<SlotReport>> Restorer::GatherReports() {
  LOOM_ASSIGN_OR_RETURN(std::vector<std::string> all,
                        AllGatherBlobs(place_.world.get(), Inventory(), RestoreDeadline()));
  const int k = origin_.code.k, m = origin_.code.m;
  std::vector<SlotReport> reports;
  for (const std::string& part : all) {
    for (size_t at = 0; at + sizeof(Record) <= part.size(); at += sizeof(Record)) {
      Record rec;
      std::memcpy(&rec, part.data() + at, sizeof(rec));
      SlotReport r;
      r.old_rank = rec.old_rank;
      r.slot = rec.slot;
      r.holder = rec.holder;
      r.step = rec.step;
      r.state = static_cast<SlotState>(rec.state);
      r.image_bytes = rec.image_bytes;
      for (int t = 0; t < k; ++t) r.piece_ok.push_back(rec.piece_ok >> t & 1);
      for (int p = 0; p < m; ++p) {
        r.parity_ok.push_back(rec.parity_ok >> p & 1);
        RowManifest mf{rec.parity_row[p], {}};
        if (mf.row >= 0) mf.crcs.assign(rec.crcs[p], rec.crcs[p] + k + m);
        r.parities.push_back(std::move(mf));
      }
      reports.push_back(std::move(r));
    }
  }
  return reports;
}

const char* Restorer::LocalImage(int x) const {
  const ImageSource& img = choice_.images[x];
  if (img.rebuilt) {
    auto it = rebuilt_.find(x);
    return it == rebuilt_.end() ? nullptr : it->second.data();
  }
  const Segment* seg = Mapped(x);
  return seg == nullptr ? nullptr : seg->image(img.pieces[0].slot);
}

int Restorer::Server(int x) const {
  const ImageSource& img = choice_.images[x];
  return img.rebuilt ? img.rebuilder : img.pieces[0].holder;
}

Status Restorer::Rebuild() {
  // Every transfer, in one order on every rank: (image, piece, fragment). A fragment the
  // rebuilder maps itself (same node as its segment) is read in place.
  struct Move {
    int x, t, f;  // image, piece, index in the piece's fragments (-1: the local piece whole)
    int src;      // new rank sending
    int old_rank, slot;
    bool parity;
    int index;  // piece or parity index in old_rank's slot
  };
  std::vector<Move> moves;
  for (const ImageSource& img : choice_.images) {
    if (!img.rebuilt) continue;
    for (int t = 0; t < static_cast<int>(img.pieces.size()); ++t) {
      const PieceSource& p = img.pieces[t];
      if (p.local) {
        moves.push_back({img.old_rank, t, -1, p.holder, img.old_rank, p.slot, false, t});
        continue;
      }
      for (int f = 0; f < static_cast<int>(p.fragments.size()); ++f) {
        const FragmentRef& fr = p.fragments[f];
        const int index = fr.parity ? fr.index - origin_.code.k : fr.index;
        moves.push_back({img.old_rank, t, f, fr.holder, fr.old_rank, fr.slot, fr.parity, index});
      }
    }
  }
  const int k = origin_.code.k;
  // Receive buffers: the rebuilder's image (local pieces) and per decoded piece k fragments.
  std::map<std::pair<int, int>, std::vector<char>> frags;  // (image, piece) -> k x P
  for (const ImageSource& img : choice_.images) {
    if (img.rebuilt && img.rebuilder == me()) {
      rebuilt_[img.old_rank].assign(static_cast<size_t>(k) * piece_bytes_[img.old_rank], 0);
    }
  }
  std::vector<HandlePtr> handles;
  Communicator* world = place_.world.get();
  KeepIfAbandoned keep(world);
  keep(frags);
  keep(rebuilt_);
  std::vector<char> zeros;  // sent in place of a fragment this rank cannot serve (an error)
  keep(zeros);
  const CallOptions opt{RestoreDeadline(), kFragmentTag};
  Status st;
  for (const Move& mv : moves) {
    const ImageSource& img = choice_.images[mv.x];
    const uint64_t P = piece_bytes_[mv.x];
    char* dst = nullptr;
    if (img.rebuilder == me()) {
      if (mv.f < 0) {
        dst = rebuilt_[mv.x].data() + static_cast<uint64_t>(mv.t) * P;
      } else {
        std::vector<char>& buf = frags[{mv.x, mv.t}];
        buf.resize(static_cast<size_t>(k) * P);
        dst = buf.data() + static_cast<uint64_t>(mv.f) * P;
      }
    }
    const Segment* seg = Mapped(mv.old_rank);
    const char* src = seg == nullptr ? nullptr
                      : mv.parity    ? seg->parity(mv.slot, mv.index)
                                     : seg->image(mv.slot) + static_cast<uint64_t>(mv.index) * P;
    // The rebuilder reads a fragment itself when it maps its segment (same node).
    const bool in_place = Maps(img.rebuilder, mv.old_rank) || mv.src == img.rebuilder;
    if ((in_place && dst != nullptr) || (!in_place && mv.src == me())) {
      if (src == nullptr && st.ok()) {
        st = Internal("snapshot restore: old rank " + std::to_string(mv.old_rank) +
                      "'s segment is not mapped on rank " + std::to_string(me()) +
                      ", which was to serve it");
      }
      if (src == nullptr) {
        zeros.resize(std::max<size_t>(zeros.size(), P));
        src = zeros.data();
      }
    }
    if (in_place) {
      if (dst != nullptr) std::memcpy(dst, src, P);
    } else if (mv.src == me()) {
      SendParts(world, src, P, img.rebuilder, opt, &handles);
    } else if (dst != nullptr) {
      RecvParts(world, dst, P, mv.src, opt, &handles);
      bytes_fetched_ += P;
    }
  }
  if (Status w = WaitAndClear(&handles, "snapshot restore: fetching fragments"); st.ok()) st = w;
  // Decode the pieces this rank rebuilds, each checked against its row's manifest.
  if (st.ok()) {
    Result<ReedSolomon> rs = ReedSolomon::Create(origin_.code.k, std::max(1, origin_.code.m));
    for (const ImageSource& img : choice_.images) {
      if (!rs.ok() || !img.rebuilt || img.rebuilder != me()) continue;
      const uint64_t P = piece_bytes_[img.old_rank];
      for (int t = 0; t < k && st.ok(); ++t) {
        const PieceSource& p = img.pieces[t];
        if (p.local) continue;
        std::vector<const uint8_t*> present(static_cast<size_t>(k + origin_.code.m), nullptr);
        const std::vector<char>& buf = frags[{img.old_rank, t}];
        for (size_t f = 0; f < p.fragments.size(); ++f) {
          present[p.fragments[f].index] = reinterpret_cast<const uint8_t*>(buf.data() + f * P);
        }
        uint8_t* out = reinterpret_cast<uint8_t*>(rebuilt_[img.old_rank].data() + t * P);
        st = rs->Decode(P, present, {t}, &out);
        if (st.ok() && Crc32c(out, P) != p.manifest[t]) {
          st = DataLoss("snapshot restore: piece " + std::to_string(t) + " of old rank " +
                        std::to_string(img.old_rank) + "'s image, rebuilt from row " +
                        std::to_string(p.row) + ", does not match the row's manifest");
        }
      }
    }
    if (st.ok() && !rs.ok()) st = rs.status();
  }
  return AgreeStatus(world, st, "rebuilding snapshot images", RestoreDeadline(),
                     StatusCode::kDataLoss);
}

Result<proto::CheckpointMetadata> Restorer::Metadata() {
  // Each image's server computes its chunk table (with block CRCs) from the bytes it holds;
  // one description of the save comes along (every rank's says the same of step, data position
  // and optimizer step count).
  proto::CheckpointMetadata mine;
  std::string description;
  for (int x = 0; x < origin_.world; ++x) {
    if (Server(x) != me()) continue;
    const char* img = LocalImage(x);
    if (img == nullptr) return Internal("snapshot restore: serving an image not held here");
    const proto::CheckpointMetadata f = ImageFragment(PlanRank(job_.model, old_layout_, x), x, img);
    mine.MergeFrom(f);
    const Segment* seg = Mapped(x);
    if (description.empty() && seg != nullptr && !choice_.images[x].rebuilt) {
      Result<std::string> d = seg->ReadMeta(choice_.images[x].pieces[0].slot);
      if (d.ok()) description = *d;
    }
  }
  std::string payload;
  mine.SerializeToString(&payload);
  const uint64_t plen = payload.size();
  std::string packed(reinterpret_cast<const char*>(&plen), sizeof(plen));
  packed += payload + description;
  LOOM_ASSIGN_OR_RETURN(std::vector<std::string> all,
                        AllGatherBlobs(place_.world.get(), packed, RestoreDeadline()));
  std::vector<proto::CheckpointMetadata> fragments;
  proto::CheckpointMetadata base;
  bool have_base = false;
  for (const std::string& p : all) {
    if (p.size() < sizeof(uint64_t)) continue;
    uint64_t n = 0;
    std::memcpy(&n, p.data(), sizeof(n));
    proto::CheckpointMetadata f;
    if (n > p.size() - sizeof(n) || !f.ParseFromString(p.substr(sizeof(n), n))) {
      return DataLoss("snapshot restore: a rank sent an unreadable chunk table");
    }
    fragments.push_back(std::move(f));
    const std::string d = p.substr(sizeof(n) + n);
    if (!have_base && !d.empty() && base.ParseFromString(d)) have_base = true;
  }
  if (!have_base) {
    return DataLoss("snapshot restore: no rank holds the description of step " +
                    std::to_string(choice_.step) + " (every image was rebuilt)");
  }
  base.clear_tensors();
  base.clear_files();
  return MergeFragments(job_.model, std::move(base), std::move(fragments),
                        "in-memory snapshot of step " + std::to_string(choice_.step));
}

Status Restorer::Prefetch(CheckpointReader* reader, RankState* state, const ParamLayout& params,
                          int tp_rank) {
  std::vector<FileRange> ranges;
  LOOM_RETURN_IF_ERROR(PlanRankStateReads(reader, params, tp_rank, kNumStates, state, &ranges));
  std::map<std::string, int> rank_of;
  for (int x = 0; x < origin_.world; ++x) rank_of[RankFileName(x)] = x;
  const int n = world();
  // What this rank asks of each server: (old rank, offset, bytes) triples.
  std::vector<std::vector<int64_t>> asks(static_cast<size_t>(n));
  std::set<std::tuple<int, uint64_t, uint64_t>> asked;
  for (const FileRange& r : ranges) {
    const int x = rank_of.at(r.file);
    if (LocalImage(x) != nullptr) continue;
    if (!asked.insert({x, r.offset, r.n}).second) continue;
    std::vector<int64_t>& a = asks[Server(x)];
    a.insert(a.end(), {x, static_cast<int64_t>(r.offset), static_cast<int64_t>(r.n)});
  }
  Communicator* world_comm = place_.world.get();
  if (world_comm == nullptr) return Status::Ok();
  KeepIfAbandoned keep(world_comm);
  keep(asks);
  keep(fetched_);
  // Who asks whom how many ranges: every rank's row of the matrix.
  std::vector<int32_t> row(static_cast<size_t>(n)), matrix(static_cast<size_t>(n) * n);
  keep(matrix);
  for (int s = 0; s < n; ++s) row[s] = static_cast<int32_t>(asks[s].size() / 3);
  LOOM_RETURN_IF_ERROR(world_comm->AllGather(ConstCommBuffer::Host(row.data(), n),
                                             CommBuffer::Host(matrix.data(), int64_t{n} * n),
                                             {RestoreDeadline()}));
  const CallOptions req{RestoreDeadline(), kRequestTag};
  const CallOptions rep{req.deadline, kBytesTag};
  std::vector<HandlePtr> handles;
  // Ask, and post the receives of the answers: each range straight into its buffer.
  for (int s = 0; s < n; ++s) {
    if (asks[s].empty()) continue;
    handles.push_back(world_comm->SendAsync(
        ConstCommBuffer::Host(reinterpret_cast<const uint8_t*>(asks[s].data()),
                              static_cast<int64_t>(asks[s].size() * sizeof(int64_t))),
        s, req));
    for (size_t i = 0; i < asks[s].size(); i += 3) {
      const auto len = static_cast<uint64_t>(asks[s][i + 2]);
      std::vector<char>& dst =
          fetched_[{static_cast<int>(asks[s][i]), static_cast<uint64_t>(asks[s][i + 1]), len}];
      dst.resize(len);
      RecvParts(world_comm, dst.data(), len, s, rep, &handles);
      bytes_fetched_ += len;
    }
  }
  // Serve: read every request, answer each range straight from the image this rank holds.
  std::vector<std::vector<int64_t>> wanted(static_cast<size_t>(n));
  keep(wanted);
  std::vector<char> zeros;  // in place of bytes this rank does not serve (an error)
  keep(zeros);
  Status st;
  for (int q = 0; q < n; ++q) {
    const int32_t count = matrix[static_cast<size_t>(q) * n + me()];
    if (count == 0) continue;
    wanted[q].resize(static_cast<size_t>(count) * 3);
    LOOM_RETURN_IF_ERROR(
        world_comm->Recv(CommBuffer::Host(reinterpret_cast<uint8_t*>(wanted[q].data()),
                                          static_cast<int64_t>(wanted[q].size() * sizeof(int64_t))),
                         q, req));
    for (size_t i = 0; i < wanted[q].size(); i += 3) {
      const int x = static_cast<int>(wanted[q][i]);
      const uint64_t off = static_cast<uint64_t>(wanted[q][i + 1]),
                     len = static_cast<uint64_t>(wanted[q][i + 2]);
      const char* img = x >= 0 && x < origin_.world ? LocalImage(x) : nullptr;
      if (img == nullptr || off + len > image_bytes_[x]) {
        if (st.ok()) {
          st = Internal("snapshot restore: rank " + std::to_string(q) +
                        " asked for bytes this rank does not serve");
        }
        zeros.resize(std::max<size_t>(zeros.size(), len));
        SendParts(world_comm, zeros.data(), len, q, rep, &handles);
        continue;
      }
      SendParts(world_comm, img + off, len, q, rep, &handles);
    }
  }
  if (Status w = WaitAndClear(&handles, "snapshot restore: fetching image bytes"); st.ok()) st = w;
  return st;
}

Result<SnapshotRestore> Restorer::Run(RankState* state, const ParamLayout& params, int tp_rank) {
  const auto t0 = std::chrono::steady_clock::now();
  Setup();
  LOOM_RETURN_IF_ERROR(OpenNodeSegments());
  LOOM_ASSIGN_OR_RETURN(std::vector<SlotReport> reports, GatherReports());
  SnapshotRestore out;
  Result<RecoveryChoice> choice = ChooseRecovery(origin_, reports, world());
  if (!choice.ok()) {  // every rank decided the same from the same reports
    out.why_not = ForUser(choice.status(), LogSubsys::SNAP);
    return out;
  }
  choice_ = std::move(*choice);
  for (ImageSource& img : choice_.images) img.image_bytes = image_bytes_[img.old_rank];
  LOOM_RETURN_IF_ERROR(Rebuild());
  Status st;
  Result<proto::CheckpointMetadata> meta = Metadata();
  std::unique_ptr<CheckpointReader> reader;
  SnapshotBytes bytes(this);
  if (meta.ok()) {
    Result<std::unique_ptr<CheckpointReader>> r = CheckpointReader::OpenFrom(
        *meta, &bytes, "in-memory snapshot of step " + std::to_string(choice_.step));
    if (r.ok()) reader = std::move(*r);
    st = r.status();
  } else {
    st = meta.status();
  }
  if (st.ok()) st = Prefetch(reader.get(), state, params, tp_rank);
  if (st.ok()) st = ReadRankState(reader.get(), params, tp_rank, kNumStates, state);
  LOOM_RETURN_IF_ERROR(AgreeStatus(place_.world.get(), st, "reading the snapshot",
                                   RestoreDeadline(), StatusCode::kDataLoss));
  state->set_optimizer_steps(meta->optimizer().step_count());
  state->StateLoaded();
  out.restored = true;
  out.step = choice_.step;
  out.consumed_samples = meta->data().consumed_samples();
  out.from = "in-memory snapshot of " + choice_.Describe();
  out.bytes_fetched = bytes_fetched_;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace

Result<SnapshotRestore> RestoreSnapshot(const proto::SnapshotPlan& plan, const JobConfig& job,
                                        const ProcessGroups& place, RankState* state,
                                        const ParamLayout& params, int tp_rank) {
  SnapshotRestore out;
  // The newest incarnation that left a snapshot to restore; every rank takes the same decision
  // from the same gathered reports.
  for (const proto::SnapshotOrigin& origin : plan.recovery().origins()) {
    Restorer r(plan, origin, job, place);
    LOOM_ASSIGN_OR_RETURN(SnapshotRestore got, r.Run(state, params, tp_rank));
    if (got.restored) return got;
    if (out.why_not.empty()) out.why_not = got.why_not;  // the newest incarnation's reason
  }
  if (plan.recovery().origins_size() == 0) out.why_not = "no earlier incarnation to restore";
  return out;
}

}  // namespace loom
