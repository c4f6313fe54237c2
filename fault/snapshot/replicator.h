// The erasure-coded half of a snapshot: after a rank has sealed its image in its segment
// (fault/snapshot/segment.h), Replicate spreads the protection over its stripe group
// (fault/snapshot/stripe.h) in two rounds of bulk transfers (comm/bulk_transport.h):
//   round A  each member sends its k pieces to the gatherers of their rows (into the gatherer's
//            staging area, with the piece's CRC-32C);
//   encode   the gatherer of row r (member r) checks the k pieces against their digests, encodes
//            the m parities (fault/erasure/reed_solomon.h), keeps parity 0 in its own slot;
//   round B  it sends parity p (p >= 1) to member r + p, straight into that member's slot, with
//            the row's manifest (the digests of its k pieces and m parities).
// Replicate returns once every fragment this rank sent was acknowledged and every fragment it
// keeps arrived and matches its digest; the segment's slot then records the manifests of the m
// parities it keeps. Every member of the group calls Replicate for the same saves, in the same
// order (the snapshot's slot alternates with the save count on every member alike), and starts
// save c + 1 only once every member has returned from save c (the staging area is reused; the
// save engine's vote between saves guarantees it).
//
// Memory: the segment (two slots of image + m/k parity) and a staging area of k pieces (one
// image's worth) for the row this rank gathers.
// Thread-safety: one thread (the snapshot writer) calls Replicate; the segment's slot is this
// rank's while it runs.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/bulk_transport.h"
#include "core/status.h"
#include "fault/erasure/reed_solomon.h"
#include "fault/snapshot/segment.h"
#include "fault/snapshot/stripe.h"

namespace loom {

struct ReplicatorStats {
  double transfer_s = 0;  // rounds A and B, waiting included
  double encode_s = 0;    // checks, RS encoding and digests of the parities
  uint64_t bytes_sent = 0;
};

class Replicator {
 public:
  // Collective over `group` (the stripe group's communicator: group rank = member index):
  // allocates the staging area and connects the members' segments (window 0) and staging
  // (window 1) over the bulk transport of `kind`. `segment` and `group` must outlive it.
  static Result<std::unique_ptr<Replicator>> Create(Segment* segment, Communicator* group,
                                                    const ErasureCode& code, BulkKind kind);
  ~Replicator();

  // Replicates save `step` held in `slot` (sealed, with these piece digests); `count` numbers
  // the saves of this epoch (0, 1, ...), the same on every member.
  Status Replicate(int slot, int64_t step, int64_t count, const std::vector<uint32_t>& piece_crcs);

  const char* transport() const { return transport_->name(); }
  const ReplicatorStats& stats() const { return stats_; }

 private:
  Replicator(Segment* segment, Communicator* group, StripeLayout layout, ReedSolomon rs)
      : segment_(segment), group_(group), layout_(layout), rs_(std::move(rs)) {}
  Status ReplicateOnce(int slot, int64_t step, int64_t count,
                       const std::vector<uint32_t>& piece_crcs);

  Segment* segment_;
  Communicator* group_;
  StripeLayout layout_;
  ReedSolomon rs_;
  char* staging_ = nullptr;   // k pieces: the row this rank gathers
  std::vector<char> outbox_;  // parities 1..m-1 of that row, before they are sent
  std::unique_ptr<BulkTransport> transport_;
  ReplicatorStats stats_;
  bool failed_ = false;  // an exchange failed: peers may still write into the staging area
};

// LOOM_SNAPSHOT_TIMEOUT_MS (default 60000): how long a snapshot's transfers may wait for a peer.
int64_t SnapshotTimeoutMs();

}  // namespace loom
