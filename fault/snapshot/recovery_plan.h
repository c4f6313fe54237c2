// Which snapshot a restarted job restores, and where every byte of it comes from: pure code over
// what the restarted ranks found in their nodes' shared memory (tested on made-up inventories).
//
// The recovery order (DESIGN §3): an old rank's image is taken from the node-local memory that
// holds it when that slot is sealed and every piece matches its digest; otherwise each of its
// pieces that is missing or damaged is rebuilt by RS decoding from k fragments of its row (data
// pieces of other members, parities with their row's manifest) that are intact; otherwise the
// snapshot cannot be restored and the caller falls back to the last universal checkpoint, with
// the reason. The step chosen is the newest one every old rank's image can be had for: a save
// every rank sealed is complete locally even when its vote did not finish; a rebuild needs the
// parities of the same save.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "fault/snapshot/segment.h"
#include "fault/snapshot/stripe.h"

namespace loom {

// The incarnation whose snapshots are restored: its world, code and stripe groups.
struct SnapshotOrigin {
  int world = 0;
  ErasureCode code;                      // m = 0: local snapshots only (k = 1)
  std::vector<std::vector<int>> groups;  // old world ranks, in member order
  std::vector<std::string> rank_node;    // old world rank -> node name
};

// One slot of one old rank's segment as a restarted rank found it.
struct SlotReport {
  int old_rank = 0;
  int slot = 0;
  int holder = 0;  // the new world rank that can serve its bytes
  int64_t step = -1;
  SlotState state = SlotState::kEmpty;
  uint64_t image_bytes = 0;
  std::vector<bool> piece_ok;   // k: intact pieces (a sealed slot)
  std::vector<bool> parity_ok;  // m: intact parities held, with their manifest
  std::vector<RowManifest> parities;
};

// Where one fragment of a row is read from.
struct FragmentRef {
  int index = 0;   // in RS order: 0..k-1 data pieces, k..k+m-1 parities
  int holder = 0;  // new world rank serving it
  int old_rank = 0;
  int slot = 0;
  bool parity = false;  // parity (index - k) of old_rank's slot, else its piece `index`
};

// One piece of an old rank's image.
struct PieceSource {
  bool local = true;  // read from holder/slot as is; else decoded
  int holder = 0, slot = 0;
  // Decoded: k fragments of its row, and the row's digests (k + m) to check the result.
  int row = -1;
  std::vector<FragmentRef> fragments;
  std::vector<uint32_t> manifest;
};

struct ImageSource {
  int old_rank = 0;
  uint64_t image_bytes = 0;
  bool rebuilt = false;  // some piece is decoded
  int rebuilder = 0;     // new world rank that assembles a rebuilt image (and serves it)
  std::vector<PieceSource> pieces;  // k
};

struct RecoveryChoice {
  int64_t step = -1;
  std::vector<ImageSource> images;  // by old world rank
  int rebuilt = 0;                  // images with a decoded piece
  std::string Describe() const;     // "step 12: 6 images from local memory, 2 rebuilt (RS)"
};

// The newest step every old rank's image can be restored at, and how. FailedPrecondition when
// none, saying which old rank (and node) cannot be had and why (e.g. more than m lost in a group).
// `new_world`: ranks of the restarted job (rebuilders are chosen among them).
Result<RecoveryChoice> ChooseRecovery(const SnapshotOrigin& origin,
                                      const std::vector<SlotReport>& reports, int new_world);

}  // namespace loom
