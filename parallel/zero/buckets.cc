// ZeRO bucket geometry.
#include "parallel/zero/buckets.h"

#include <algorithm>

namespace loom {

BucketGeometry::BucketGeometry(const ParamLayout& layout, int dp_size, int dp_rank, bool sharded)
    : layout_(&layout), dp_rank_(dp_rank), sharded_(sharded) {
  const int nb = layout.num_buckets();
  for (int b = 0; b < nb; ++b) {
    const int64_t size = layout.buckets[b].second - layout.buckets[b].first;
    const int64_t padded = (size + dp_size - 1) / dp_size * dp_size;
    full_base_.push_back(full_size_);
    padded_.push_back(padded);
    chunk_.push_back(padded / dp_size);
    shard_base_.push_back(shard_size_);
    full_size_ += padded;
    shard_size_ += padded / dp_size;
  }
  persistent_.assign(nb, true);
  for (const ParamInfo& p : layout.params) {
    if (p.layer >= 0) persistent_[p.bucket] = false;
  }
  segments_.resize(nb);
  for (size_t k = 0; k < layout.params.size(); ++k) {
    const ParamInfo& p = layout.params[k];
    const int b = p.bucket;
    const int64_t lo = sharded ? owned_begin(b) : 0;
    const int64_t hi = sharded ? lo + chunk_[b] : padded_[b];
    const int64_t begin = std::max(lo, p.bucket_offset);
    const int64_t end = std::min(hi, p.bucket_offset + p.numel());
    if (begin < end) {
      segments_[b].push_back(
          {static_cast<int>(k), begin - p.bucket_offset, end - begin, begin - lo});
    }
  }
}

int64_t BucketGeometry::size(int b) const {
  return layout_->buckets[b].second - layout_->buckets[b].first;
}

}  // namespace loom
