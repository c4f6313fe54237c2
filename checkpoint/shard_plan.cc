// Rank responsibilities for the universal checkpoint.
#include "checkpoint/shard_plan.h"
#include "model/layout.h"

#include <algorithm>

namespace loom {

void GlobalMatrix(const ParamInfo& p, int64_t* rows, int64_t* cols) {
  *rows = p.global_shape[0];
  *cols = p.global_shape.size() > 1 ? p.global_shape[1] : 1;
}

Region WholeRegion(const ParamInfo& p) {
  Region r;
  GlobalMatrix(p, &r.rows, &r.cols);
  r.flat_end = r.rows * r.cols;
  return r;
}

void MapParamRange(const ParamLayout& layout, int param, int tp_rank, int64_t lo, int64_t hi,
                   std::vector<Piece>* out) {
  const ParamInfo& p = layout.params[static_cast<size_t>(param)];
  const int64_t cols = p.shape.size() > 1 ? p.shape[1] : 1;
  const int64_t local_rows = p.shape[0];
  int64_t grows, gcols;
  GlobalMatrix(p, &grows, &gcols);
  const int parts = p.shard == ShardKind::kRows ? p.parts : 1;
  const int64_t part_rows = local_rows / parts;
  for (int k = 0; k < parts; ++k) {
    const int64_t part_lo = k * part_rows * cols, part_hi = (k + 1) * part_rows * cols;
    const int64_t a = std::max(lo, part_lo), b = std::min(hi, part_hi);
    if (a >= b) continue;
    Region r;
    r.rows = part_rows;
    r.cols = cols;
    if (p.shard == ShardKind::kRows) {
      // Global rows of one part, padding included (wte's vocabulary is padded to a multiple of tp).
      const int64_t gpart = part_rows * layout.tp;
      r.row0 = k * gpart + tp_rank * part_rows;
    } else if (p.shard == ShardKind::kCols) {
      r.col0 = tp_rank * cols;
    }
    const int64_t valid_rows = std::clamp<int64_t>(grows - r.row0, 0, r.rows);
    r.rows = valid_rows;
    r.flat_begin = a - part_lo;
    r.flat_end = std::min(b - part_lo, valid_rows * cols);
    if (r.flat_begin >= r.flat_end) continue;
    out->push_back({param, p.bucket, p.offset + a, r});
  }
}

void MapBucketRange(const ParamLayout& layout, int bucket, int tp_rank, int64_t lo, int64_t hi,
                    bool replicated_writer_only, std::vector<Piece>* out) {
  for (size_t k = 0; k < layout.params.size(); ++k) {
    const ParamInfo& p = layout.params[k];
    if (p.bucket != bucket) continue;
    if (replicated_writer_only && p.shard == ShardKind::kReplicated &&
        static_cast<int>(k % static_cast<size_t>(layout.tp)) != tp_rank) {
      continue;
    }
    const int64_t a = std::max(lo, p.bucket_offset), b = std::min(hi, p.bucket_offset + p.numel());
    if (a < b) {
      MapParamRange(layout, static_cast<int>(k), tp_rank, a - p.bucket_offset, b - p.bucket_offset,
                    out);
    }
  }
}

RankShardPlan PlanRank(const ModelConfig& model, const Layout& lay, int world_rank) {
  RankShardPlan plan;
  plan.layout = ModelLayout(model, lay.tp, RankChunks(model.layers, lay, world_rank));
  plan.tp_rank = lay.CoordOf(world_rank).tp;
  const std::vector<int> group =
      lay.GroupOf(lay.cp > 1 ? GroupKind::kDataContext : GroupKind::kData, world_rank);
  plan.owners = static_cast<int>(group.size());
  plan.owner = static_cast<int>(std::find(group.begin(), group.end(), world_rank) - group.begin());
  for (int b = 0; b < plan.layout.num_buckets(); ++b) {
    const int64_t size = plan.layout.buckets[b].second - plan.layout.buckets[b].first;
    const int64_t padded = (size + plan.owners - 1) / plan.owners * plan.owners;
    plan.chunk.push_back(padded / plan.owners);
    const int64_t lo = plan.OwnedBegin(b);
    MapBucketRange(plan.layout, b, plan.tp_rank, lo, lo + plan.chunk[b], true, &plan.writes);
  }
  return plan;
}

}  // namespace loom
