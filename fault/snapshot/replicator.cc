// Rounds A (pieces to gatherers) and B (parities to their holders) of an erasure-coded snapshot.
#include "fault/snapshot/replicator.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "core/crc32c.h"
#include "core/fault_point.h"
#include "core/tunables.h"

namespace loom {
namespace {

const IntTunable kSnapshotTimeout =
    RegisterTunable({"LOOM_SNAPSHOT_TIMEOUT_MS", 60000, 1, kMaxTunableMs, "a number of ms"});

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A note: the save's step, then digests.
std::string Note(int64_t step, const std::vector<uint32_t>& crcs) {
  std::string s(sizeof(step) + crcs.size() * 4, '\0');
  std::memcpy(s.data(), &step, sizeof(step));
  std::memcpy(s.data() + sizeof(step), crcs.data(), crcs.size() * 4);
  return s;
}

bool ParseNote(const std::string& s, int64_t* step, size_t crcs, std::vector<uint32_t>* out) {
  if (s.size() != sizeof(int64_t) + crcs * 4) return false;
  std::memcpy(step, s.data(), sizeof(int64_t));
  out->resize(crcs);
  std::memcpy(out->data(), s.data() + sizeof(int64_t), crcs * 4);
  return true;
}

}  // namespace

int64_t SnapshotTimeoutMs() {
  return TunableOr(kSnapshotTimeout);
}

Result<std::unique_ptr<Replicator>> Replicator::Create(Segment* segment, Communicator* group,
                                                       const ErasureCode& code, BulkKind kind) {
  LOOM_ASSIGN_OR_RETURN(StripeLayout layout, StripeLayout::Create(group->size(), code.k, code.m));
  LOOM_ASSIGN_OR_RETURN(ReedSolomon rs, ReedSolomon::Create(code.k, code.m));
  const SegmentGeometry& g = segment->geometry();
  if (g.k != code.k || g.m != code.m) {
    return InvalidArgument("snapshot replicator: the segment is cut for RS(" + std::to_string(g.k) +
                           "," + std::to_string(g.m) + "), the group uses " + code.ToString());
  }
  std::unique_ptr<Replicator> r(new Replicator(segment, group, layout, std::move(rs)));
  const uint64_t staging = std::max<uint64_t>(g.ImageArea(), kSegmentAlignment);
  r->staging_ = static_cast<char*>(std::aligned_alloc(kSegmentAlignment, staging));
  if (r->staging_ == nullptr) {
    return Internal("snapshot: out of memory for a staging area of " + std::to_string(staging) +
                    " bytes");
  }
  r->outbox_.resize(static_cast<size_t>(code.m - 1) * g.piece_bytes);
  LOOM_ASSIGN_OR_RETURN(
      r->transport_, CreateBulkTransport(
                         kind, group, {{segment->base(), g.TotalBytes()}, {r->staging_, staging}}));
  return r;
}

Replicator::~Replicator() {
  transport_.reset();  // unregisters the staging area first
  // After a failed exchange a peer may still be writing into the staging area: it stays.
  if (!failed_) std::free(staging_);
}

Status Replicator::Replicate(int slot, int64_t step, int64_t count,
                             const std::vector<uint32_t>& piece_crcs) {
  Status st = ReplicateOnce(slot, step, count, piece_crcs);
  if (!st.ok()) failed_ = true;
  return st;
}

Status Replicator::ReplicateOnce(int slot, int64_t step, int64_t count,
                                 const std::vector<uint32_t>& piece_crcs) {
  const SegmentGeometry& g = segment_->geometry();
  const int me = group_->rank(), k = layout_.k(), m = layout_.m();
  const uint64_t P = g.piece_bytes;
  const Deadline deadline = Clock::now() + std::chrono::milliseconds(SnapshotTimeoutMs());
  const std::string what = "snapshot step " + std::to_string(step);
  const int world_rank = group_->world_rank();

  // Round A: my pieces to the gatherers of their rows; the pieces of my row to me.
  auto t0 = std::chrono::steady_clock::now();
  FaultPoint({FaultSite::kSnapshotTransfer, world_rank, step, "pieces"});
  std::vector<BulkSend> sends;
  for (int t = 0; t < k; ++t) {
    const int row = layout_.RowOfPiece(me, t);
    sends.push_back({row, 1, static_cast<uint64_t>(t) * P,
                     segment_->image(slot) + static_cast<uint64_t>(t) * P, P,
                     Note(step, {piece_crcs[t]})});
    stats_.bytes_sent += P;
  }
  std::vector<BulkRecv> recvs;
  for (int t = 0; t < k; ++t) {
    recvs.push_back({layout_.DataMember(me, t), 1, static_cast<uint64_t>(t) * P, P, ""});
  }
  LOOM_RETURN_IF_ERROR(
      transport_->Exchange(static_cast<uint64_t>(count) * 2, sends, &recvs, deadline)
          .WithContext(what));
  stats_.transfer_s += Since(t0);

  // Encode my row: check the pieces, RS, digests.
  t0 = std::chrono::steady_clock::now();
  FaultPoint({FaultSite::kSnapshotEncode, world_rank, step, "encode"});
  RowManifest manifest{me, std::vector<uint32_t>(static_cast<size_t>(k + m))};
  std::vector<const uint8_t*> data(static_cast<size_t>(k));
  for (int t = 0; t < k; ++t) {
    int64_t s = -1;
    std::vector<uint32_t> crc;
    const char* piece = staging_ + static_cast<uint64_t>(t) * P;
    const int from = group_->members()[layout_.DataMember(me, t)];
    if (!ParseNote(recvs[t].note, &s, 1, &crc) || s != step || Crc32c(piece, P) != crc[0]) {
      return DataLoss(what + ": the piece from rank " + std::to_string(from) +
                      " does not match its digest (corrupted in transfer, or another save's)");
    }
    manifest.crcs[t] = crc[0];
    data[t] = reinterpret_cast<const uint8_t*>(piece);
  }
  std::vector<uint8_t*> parity(static_cast<size_t>(m));
  parity[0] = reinterpret_cast<uint8_t*>(segment_->parity(slot, 0));
  for (int p = 1; p < m; ++p) {
    parity[p] = reinterpret_cast<uint8_t*>(outbox_.data() + static_cast<uint64_t>(p - 1) * P);
  }
  rs_.Encode(P, data.data(), parity.data());
  for (int p = 0; p < m; ++p) manifest.crcs[k + p] = Crc32c(parity[p], P);
  segment_->SetParity(slot, 0, manifest);
  stats_.encode_s += Since(t0);

  // Round B: parities 1..m-1 of my row to their holders, the parities I keep for other rows.
  t0 = std::chrono::steady_clock::now();
  FaultPoint({FaultSite::kSnapshotTransfer, world_rank, step, "parities"});
  sends.clear();
  recvs.clear();
  for (int p = 1; p < m; ++p) {
    sends.push_back({layout_.ParityMember(me, p), 0, g.ParityOffset(slot, p),
                     reinterpret_cast<const char*>(parity[p]), P, Note(step, manifest.crcs)});
    stats_.bytes_sent += P;
  }
  for (int p = 1; p < m; ++p) {
    recvs.push_back({layout_.RowOfParity(me, p), 0, g.ParityOffset(slot, p), P, ""});
  }
  LOOM_RETURN_IF_ERROR(
      transport_->Exchange(static_cast<uint64_t>(count) * 2 + 1, sends, &recvs, deadline)
          .WithContext(what));
  for (int p = 1; p < m; ++p) {
    RowManifest kept{layout_.RowOfParity(me, p), {}};
    int64_t s = -1;
    const int from = group_->members()[kept.row];
    if (!ParseNote(recvs[p - 1].note, &s, static_cast<size_t>(k + m), &kept.crcs) || s != step ||
        Crc32c(segment_->parity(slot, p), P) != kept.crcs[k + p]) {
      return DataLoss(what + ": parity " + std::to_string(p) + " from rank " +
                      std::to_string(from) + " does not match its digest");
    }
    segment_->SetParity(slot, p, kept);
  }
  stats_.transfer_s += Since(t0);
  return Status::Ok();
}

}  // namespace loom
