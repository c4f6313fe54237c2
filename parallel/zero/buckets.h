// ZeRO bucket math shared by every stage: where each bucket lives in the full and the sharded flat
// buffers, which chunk of it this data-parallel rank owns, and the parameter segments the
// optimizer updates. Pure arithmetic over the ParamLayout; no buffers, no communication.
//
// Invariants: bucket b (size s = layout.buckets[b] end - begin) is padded to
// padded(b) = ceil(s / D) * D elements (D = data-parallel size) and occupies
// [full_base(b), full_base(b) + padded(b)) of a full buffer; rank R owns its chunk
// [R * chunk(b), (R + 1) * chunk(b)), chunk(b) = padded(b) / D, stored at shard_base(b) of a shard
// buffer. Padding elements are zero and never updated.
//
// The optimizer's domain of a bucket is the whole padded bucket (stage 0: every rank updates
// everything) or the rank's chunk (stages 1-3); segments(b) cuts the domain at parameter
// boundaries, with offsets relative to the domain's first element.
#pragma once

#include <cstdint>
#include <vector>

#include "parallel/param_layout.h"

namespace loom {

// Part of one parameter inside the optimizer's domain of a bucket.
struct Segment {
  int param;             // index into layout.params
  int64_t param_begin;   // first element of the parameter covered
  int64_t length;        // elements
  int64_t chunk_offset;  // offset inside the domain (the rank's chunk, or the padded bucket)
};

class BucketGeometry {
 public:
  // `sharded`: the optimizer's domain is the rank's chunk (ZeRO 1-3) rather than the bucket.
  BucketGeometry(const ParamLayout& layout, int dp_size, int dp_rank, bool sharded);

  const ParamLayout& layout() const { return *layout_; }
  int num_buckets() const { return static_cast<int>(padded_.size()); }
  int dp_rank() const { return dp_rank_; }
  bool sharded() const { return sharded_; }

  int64_t size(int b) const;  // real (unpadded) elements
  int64_t padded(int b) const { return padded_[b]; }
  int64_t chunk(int b) const { return chunk_[b]; }
  int64_t full_base(int b) const { return full_base_[b]; }
  int64_t shard_base(int b) const { return shard_base_[b]; }
  // First bucket-relative element of this rank's chunk.
  int64_t owned_begin(int b) const { return dp_rank_ * chunk_[b]; }
  int64_t full_size() const { return full_size_; }    // sum of padded(b)
  int64_t shard_size() const { return shard_size_; }  // sum of chunk(b)
  // A bucket without layer parameters (embeddings, final norm): ZeRO-3 keeps it gathered for the
  // whole step.
  bool persistent(int b) const { return persistent_[b]; }
  const std::vector<Segment>& segments(int b) const { return segments_[b]; }

 private:
  const ParamLayout* layout_;
  int dp_rank_ = 0;
  bool sharded_ = false;
  int64_t full_size_ = 0, shard_size_ = 0;
  std::vector<int64_t> full_base_, padded_, chunk_, shard_base_;
  std::vector<bool> persistent_;
  std::vector<std::vector<Segment>> segments_;
};

}  // namespace loom
