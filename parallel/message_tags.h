// Every message tag Loom uses for point-to-point transfers, allocated in one place.
//
// A communicator matches a send with a receive by (peer, tag) in issue order (comm/communicator.h),
// so two users that exchange messages between the same peers of one communicator must never share
// a tag: a receive could take the other user's message. Each user owns a range of tags here; the
// ranges of users that share a communicator are disjoint, which is checked at compile time, and a
// user whose indices could overflow its range checks them when it is set up (Check*Tags), so a
// layout that would need more tags is refused instead of mixing messages.
//
// Today's users (values as they have always been; traces record them):
//   pipeline group  [0, 20000)      activation / gradient of (micro-batch, destination chunk)
//                   [20000, 30000)  forward-only evaluation: activation into global chunk g
//                   30000, 30001    tied embeddings: wte (first -> last stage), its gradient back
//   context group   [100, 200)      ring attention forward: K/V of ring step s
//                   [200, 300)      ring attention backward: K/V of ring step s
//                   [300, 400)      ring attention backward: dK/dV of ring step s
//   world           [500, 503)      restoring in-memory snapshots: fragments to rebuilders,
//                                   byte-range requests, the bytes asked for
// A new user adds its range to kTagRanges (the compile-time check then covers it).
#pragma once

#include <cstdint>

#include "core/status.h"

namespace loom {

// The communicator a range of tags is used on.
enum class TagGroup { kPipeline, kContext, kWorld };

// Tags [first, first + count) of one user.
struct TagRange {
  TagGroup group;
  int first;
  int count;
  const char* user;
  constexpr int end() const { return first + count; }
  constexpr bool Overlaps(const TagRange& o) const {
    return group == o.group && first < o.end() && o.first < end();
  }
};

inline constexpr TagRange kPipelineTransferTags{TagGroup::kPipeline, 0, 20000,
                                                "pipeline activations and gradients"};
inline constexpr TagRange kPipelineEvalTags{TagGroup::kPipeline, 20000, 10000,
                                            "pipeline evaluation activations"};
inline constexpr TagRange kTiedEmbeddingTags{TagGroup::kPipeline, 30000, 2,
                                             "tied embedding exchange"};
inline constexpr TagRange kRingForwardTags{TagGroup::kContext, 100, 100,
                                           "ring attention forward K/V"};
inline constexpr TagRange kRingBackwardKvTags{TagGroup::kContext, 200, 100,
                                              "ring attention backward K/V"};
inline constexpr TagRange kRingBackwardGradTags{TagGroup::kContext, 300, 100,
                                                "ring attention backward dK/dV"};

inline constexpr TagRange kSnapshotRestoreTags{TagGroup::kWorld, 500, 3,
                                               "in-memory snapshot restore"};
inline constexpr TagRange kTagRanges[] = {kPipelineTransferTags, kPipelineEvalTags,
                                          kTiedEmbeddingTags,    kRingForwardTags,
                                          kRingBackwardKvTags,   kRingBackwardGradTags,
                                          kSnapshotRestoreTags};

constexpr bool TagRangesAreDisjoint() {
  for (const TagRange& a : kTagRanges) {
    for (const TagRange& b : kTagRanges) {
      if (&a != &b && a.Overlaps(b)) return false;
    }
  }
  return true;
}
static_assert(TagRangesAreDisjoint(), "two users of one communicator share message tags");

// Pipeline group. Activations (grad = false) and gradients (grad = true) are tagged by micro-batch
// and destination global chunk, so any number may be in flight between two stages.
constexpr int PipelineTransferTag(bool grad, int micro, int chunk, int chunks) {
  return kPipelineTransferTags.first + (micro * chunks + chunk) * 2 + (grad ? 1 : 0);
}
constexpr int PipelineEvalTag(int chunk) {
  return kPipelineEvalTags.first + chunk;
}
inline constexpr int kTiedWteTag = kTiedEmbeddingTags.first;
inline constexpr int kTiedWteGradTag = kTiedEmbeddingTags.first + 1;

// Context group: one tag per ring step (s < cp) in each of the three transfers.
constexpr int RingForwardTag(int step) {
  return kRingForwardTags.first + step;
}
constexpr int RingBackwardKvTag(int step) {
  return kRingBackwardKvTags.first + step;
}
constexpr int RingBackwardGradTag(int step) {
  return kRingBackwardGradTags.first + step;
}

// Whether a pipeline step of `micro` micro-batches over `chunks` global chunks fits its tag ranges
// (FailedPrecondition naming the limit otherwise).
Status CheckPipelineTags(int64_t micro, int64_t chunks);
// Whether a ring of `cp` ranks fits its tag ranges.
Status CheckRingTags(int64_t cp);

}  // namespace loom
