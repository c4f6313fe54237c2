// Parameter layout math and seeded initialisation.
#include "parallel/param_layout.h"

#include "core/rng.h"

namespace loom {

ParamLayoutBuilder::ParamLayoutBuilder(int tp, int64_t vocab) {
  out_.tp = tp;
  out_.padded_vocab = (vocab + tp - 1) / tp * tp;
}

void ParamLayoutBuilder::Add(TensorSpec t) {
  const int tp = out_.tp;
  Shape local = t.global_shape;
  if (t.shard == ShardKind::kRows) local[0] = (t.pad_rows ? out_.padded_vocab : local[0]) / tp;
  if (t.shard == ShardKind::kCols) local[1] = local[1] / tp;
  ParamInfo p{
      std::move(t.name), local,   std::move(t.global_shape),  t.shard, t.parts,    out_.total,
      t.layer,           bucket_, out_.total - bucket_begin_, t.decay, t.init_std, t.init_value};
  p.tp_partial_grad = t.tp_partial_grad;
  out_.total += p.numel();
  out_.params.push_back(std::move(p));
}

void ParamLayoutBuilder::CloseBucket() {
  out_.buckets.emplace_back(bucket_begin_, out_.total);
  bucket_begin_ = out_.total;
  ++bucket_;
}

ParamLayout ParamLayoutBuilder::Finish() {
  return std::move(out_);
}

std::vector<ChunkSpec> RankChunks(int64_t layers, const Layout& lay, int rank) {
  const int pp_rank = lay.CoordOf(rank).pp;
  const int chunks_total = lay.pp * lay.vpp;
  Result<std::vector<int>> split = lay.ChunkLayers(layers);
  // A layout that does not split the layers was refused by Layout::Validate; even is the
  // fallback that keeps this total.
  std::vector<int> per(static_cast<size_t>(chunks_total), static_cast<int>(layers) / chunks_total);
  if (split.ok()) per = *split;
  std::vector<int> first(per.size() + 1, 0);
  for (size_t g = 0; g < per.size(); ++g) first[g + 1] = first[g] + per[g];
  std::vector<ChunkSpec> chunks;
  for (int k = 0; k < lay.vpp; ++k) {
    const int g = k * lay.pp + pp_rank;
    chunks.push_back({first[static_cast<size_t>(g)], per[static_cast<size_t>(g)], g == 0,
                      g == chunks_total - 1});
  }
  return chunks;
}

int ParamLayout::IndexOf(const std::string& name) const {
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int64_t ParamInfo::GlobalIndex(int64_t i, int tp_rank, int tp) const {
  const int64_t cols = shape.size() > 1 ? shape[1] : 1;
  const int64_t row = i / cols, col = i % cols;
  int64_t grow = row, gcol = col;
  if (shard == ShardKind::kRows) {
    const int64_t local_part = shape[0] / parts;  // rows of one part on this rank
    grow = (row / local_part) * local_part * tp + tp_rank * local_part + row % local_part;
    if (grow >= global_shape[0]) return -1;  // vocabulary padding
  } else if (shard == ShardKind::kCols) {
    gcol = tp_rank * shape[1] + col;
  }
  const int64_t gcols = global_shape.size() > 1 ? global_shape[1] : 1;
  return grow * gcols + gcol;
}

const ParamInfo* ParamLayout::Find(const std::string& name) const {
  for (const ParamInfo& p : params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

void InitParams(const ParamLayout& layout, uint64_t seed, float* data, int tp_rank) {
  for (const ParamInfo& p : layout.params) {
    float* d = data + p.offset;
    const int64_t n = p.numel();
    const uint64_t stream = HashString(p.name.c_str());
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t g = p.GlobalIndex(i, tp_rank, layout.tp);
      if (g < 0) {
        d[i] = 0.0f;
      } else if (p.init_std > 0) {
        d[i] = static_cast<float>(NormalAt(seed, stream, static_cast<uint64_t>(g)) * p.init_std);
      } else {
        d[i] = p.init_value;
      }
    }
  }
}

void ScatterToFull(const ParamLayout& local, const float* data, int tp_rank,
                   const ParamLayout& full_layout, float* full) {
  for (const ParamInfo& p : local.params) {
    const ParamInfo& f = *full_layout.Find(p.name);
    for (int64_t i = 0; i < p.numel(); ++i) {
      const int64_t g = p.GlobalIndex(i, tp_rank, local.tp);
      if (g >= 0) full[f.offset + g] = data[p.offset + i];
    }
  }
}

}  // namespace loom
