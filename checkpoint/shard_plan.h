// Which parts of which tensors a rank holds and writes: pure functions of the model, the layout
// and the rank, shared by the distributed save, the load and the offline resharder (so a
// resharded checkpoint is byte for byte what the target layout would have saved).
//
// Responsibility for writing: rank R of a data-parallel (x context) group of D ranks writes chunk
// R of every bucket, the bucket padded to a multiple of D exactly as the ZeRO store pads it (under
// ZeRO >= 1 that is the shard R owns; under stage 0 every rank holds the whole bucket and the same
// split spreads the writing). Tensor-parallel replicated parameters are written by one TP rank
// (parameter index mod tp), so nothing is written twice.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/region.h"
#include "core/status.h"
#include "model/config.h"
#include "parallel/layout.h"
#include "parallel/param_layout.h"
#include "parallel/state_kind.h"

namespace loom {

// Elements of a rank's local flat buffer that map onto one region of one global tensor.
struct Piece {
  int param = 0;  // index into ParamLayout::params
  int bucket = 0;
  int64_t local = 0;  // offset in the local flat buffer (ParamLayout offsets); size = region.size()
  Region region;
};

// The global tensor of `p` viewed as a matrix (1-D: n x 1).
void GlobalMatrix(const ParamInfo& p, int64_t* rows, int64_t* cols);
// All of that matrix as a Region.
Region WholeRegion(const ParamInfo& p);

// Pieces of elements [lo, hi) of parameter `param` (offsets relative to the parameter's start) on
// TP rank `tp_rank`; vocabulary padding rows yield nothing.
void MapParamRange(const ParamLayout& layout, int param, int tp_rank, int64_t lo, int64_t hi,
                   std::vector<Piece>* out);

// Pieces of bucket elements [lo, hi) (bucket-relative; padding beyond the bucket is ignored).
// `replicated_writer_only`: skip TP-replicated parameters this TP rank does not write.
void MapBucketRange(const ParamLayout& layout, int bucket, int tp_rank, int64_t lo, int64_t hi,
                    bool replicated_writer_only, std::vector<Piece>* out);

struct RankShardPlan {
  ParamLayout layout;  // this rank's parameters (its TP shard of its pipeline chunks)
  int tp_rank = 0;
  int owner = 0, owners = 1;   // index in the data(-context) group, and its size
  std::vector<int64_t> chunk;  // per bucket: padded size / owners
  std::vector<Piece> writes;   // what this rank writes for each state, in file order

  // Bucket-relative range [begin, end) this rank writes for bucket b.
  int64_t OwnedBegin(int b) const { return owner * chunk[b]; }
};

RankShardPlan PlanRank(const ModelConfig& model, const Layout& layout, int world_rank);

}  // namespace loom
