// One rank's in-memory snapshots: a POSIX shared-memory object (/dev/shm/<name>) that outlives a
// crashed worker process, holding two slots so that a snapshot being written never overwrites the
// last complete one.
//
//   [segment header, 4 KiB] [slot 0] [slot 1]
//   slot = [slot header, 4 KiB] [image: k pieces of piece_bytes] [parity: m x piece_bytes]
//          [description: up to kMetaCapacity bytes]
//
// The image is the rank's state exactly as the save engine copies it (checkpoint/save_engine.h:
// each state of each piece of the rank's shard plan, fp32), zero-padded to k pieces. The parity
// area holds the m parity fragments this rank keeps for other ranks' rows (fault/snapshot/
// stripe.h). The description is the save's proto::CheckpointMetadata (step, data position,
// layout...), serialized, for the restore.
//
// A slot's header is its manifest: state, step, the CRC-32C of each of its k pieces, and for each
// parity fragment it holds, the digests of every fragment of that row (k data, m parity), so a
// rebuild can check what it decoded; the header carries a CRC of its own, so a header torn by a
// crash reads as invalid, never as valid. States only move forward within a save: writing ->
// sealed (image complete, piece CRCs recorded) -> replicated (every fragment of the save this
// rank sent or keeps is acknowledged) -> committed (every rank replicated; the vote said so).
//
// Names: "loom-<job>-<node>-e<epoch>-r<rank>" (job: the job's key; node: the rank's node, so
// logical nodes on one host each have their own namespace; epoch: the incarnation of the job
// that wrote it). Thread-safety: none; the writer thread owns a slot while it writes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace loom {

inline constexpr uint64_t kSegmentAlignment = 4096;
inline constexpr int kMaxSnapshotK = 32;
inline constexpr int kMaxSnapshotM = 8;
inline constexpr uint64_t kMetaCapacity = 1 << 16;

enum class SlotState : uint32_t {
  kEmpty = 0,
  kWriting = 1,
  kSealed = 2,
  kReplicated = 3,
  kCommitted = 4,
};
const char* SlotStateName(SlotState s);

// The sizes of one rank's segment.
struct SegmentGeometry {
  uint64_t image_bytes = 0;  // this rank's image
  uint64_t piece_bytes = 0;  // one piece / fragment (the stripe group's PieceBytes)
  int k = 1;                 // pieces per image (1 without erasure coding)
  int m = 0;                 // parity fragments kept (0 without erasure coding)

  uint64_t ImageArea() const { return static_cast<uint64_t>(k) * piece_bytes; }
  uint64_t ParityArea() const { return static_cast<uint64_t>(m) * piece_bytes; }
  uint64_t SlotBytes() const;
  uint64_t TotalBytes() const;
  // Byte offsets from the start of the segment.
  uint64_t SlotOffset(int slot) const;
  uint64_t ImageOffset(int slot) const { return SlotOffset(slot) + kSegmentAlignment; }
  uint64_t ParityOffset(int slot, int p) const;
  uint64_t MetaOffset(int slot) const;
  Status Check() const;  // within the limits, image fits in the pieces
};

// Who wrote a segment (checked when it is opened again).
struct SegmentIdentity {
  std::string job;   // the job's key
  std::string node;  // the node's name
  int epoch = 0;
  int rank = 0;  // world rank in that epoch's layout
};

// The segment's name for `id` (characters outside [A-Za-z0-9._] become '_').
std::string SegmentName(const SegmentIdentity& id);
// The prefix of every segment of job `job` ("loom-<job>-"), and of those of one node.
std::string JobSegmentPrefix(const std::string& job);
std::string NodeSegmentPrefix(const std::string& job, const std::string& node);
// Removes every shared-memory object in /dev/shm whose name starts with `prefix`; returns how
// many. Errors other than "already gone" are returned naming the object.
Result<int> RemoveSegments(const std::string& prefix);

// A node's marker: an empty object "loom-<job>-<node>-alive" that a launch on logical nodes (one
// host) creates for each node. Dropping a node removes it with the node's segments, which is how
// the launcher tells a lost logical node from a crashed worker.
Status CreateNodeMarker(const std::string& job, const std::string& node);
bool NodeMarkerExists(const std::string& job, const std::string& node);

// The manifest of one parity fragment a rank keeps: which row, and the digests of every fragment
// of the row.
struct RowManifest {
  int row = -1;                // -1: this parity is not (yet) held for the slot's save
  std::vector<uint32_t> crcs;  // k + m: data pieces, then parities
};

// A slot's header as read (a copy; fields valid only when `valid`).
struct SlotInfo {
  bool valid = false;  // header checksum correct and the geometry matches
  SlotState state = SlotState::kEmpty;
  int64_t step = -1;
  uint64_t image_bytes = 0;
  std::vector<uint32_t> piece_crcs;   // k
  std::vector<RowManifest> parities;  // m, by parity index p
  uint64_t meta_bytes = 0;
};

class Segment {
 public:
  // Creates the segment (replacing a stale one of the same name), sized and mapped read-write,
  // both slots empty. Errors name the segment and say what failed (e.g. /dev/shm full).
  static Result<Segment> Create(const SegmentIdentity& id, const SegmentGeometry& geometry);
  // Opens an existing segment (of a crashed or earlier incarnation) read-write and checks its
  // header: the magic, version, identity and a size that matches its geometry. NotFound when it
  // does not exist.
  static Result<Segment> Open(const SegmentIdentity& id);
  Segment(Segment&& o) noexcept;
  Segment& operator=(Segment&& o) noexcept;
  ~Segment();  // unmaps; the object stays in /dev/shm (Unlink removes it)

  const std::string& name() const { return name_; }
  const SegmentGeometry& geometry() const { return geo_; }
  char* base() const { return base_; }  // the whole mapping (TotalBytes)
  char* image(int slot) const { return base_ + geo_.ImageOffset(slot); }
  char* parity(int slot, int p) const { return base_ + geo_.ParityOffset(slot, p); }

  // Writer side, in order, for save `step` into `slot`:
  // Begin: the slot is writing (its old contents invalid from now on); `meta` is the save's
  // serialized description (at most kMetaCapacity bytes).
  Status Begin(int slot, int64_t step, const std::string& meta);
  // Seal: zero-pads the image to k pieces, records each piece's CRC; returns them.
  std::vector<uint32_t> Seal(int slot, uint64_t image_bytes);
  // Records the manifest of parity fragment p (its row and the row's k + m digests).
  void SetParity(int slot, int p, const RowManifest& manifest);
  void MarkReplicated(int slot);
  void MarkCommitted(int slot);

  // Reader side.
  SlotInfo ReadSlot(int slot) const;
  Result<std::string> ReadMeta(int slot) const;  // the description; DataLoss when corrupt
  // Whether piece t / parity p of the slot matches the digest recorded in its header.
  bool PieceIntact(int slot, const SlotInfo& info, int t) const;
  bool ParityIntact(int slot, const SlotInfo& info, int p) const;

  // Removes the object from /dev/shm (the mapping stays valid until destroyed).
  Status Unlink();

 private:
  Segment() = default;
  struct SlotHeader* slot_header(int slot) const;
  void Reseal(int slot);  // recomputes the slot header's checksum

  std::string name_;
  SegmentGeometry geo_;
  char* base_ = nullptr;
  uint64_t mapped_ = 0;
};

}  // namespace loom
