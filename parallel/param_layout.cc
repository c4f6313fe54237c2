// Parameter layout and seeded initialisation.
#include "parallel/param_layout.h"

#include <cmath>

#include "core/rng.h"

namespace loom {

Status ModelConfig::Validate() const {
  if (vocab <= 0 || max_seq <= 0 || layers <= 0 || heads <= 0 || hidden <= 0) {
    return InvalidArgument("model sizes must be positive");
  }
  if (hidden % heads != 0) {
    return InvalidArgument("model.hidden (" + std::to_string(hidden) +
                           ") must be a multiple of model.heads (" + std::to_string(heads) + ")");
  }
  return Status::Ok();
}

ParamLayout ParamLayout::ForModel(const ModelConfig& m, int tp) {
  return ForChunks(m, tp, {ChunkSpec{0, static_cast<int>(m.layers), true, true}});
}

ParamLayout ParamLayout::ForChunks(const ModelConfig& m, int tp,
                                   const std::vector<ChunkSpec>& chunks) {
  ParamLayout out;
  out.tp = tp;
  out.padded_vocab = (m.vocab + tp - 1) / tp * tp;
  const int64_t c = m.hidden;
  const float std = 0.02f;
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(m.layers));
  int bucket = 0;
  int64_t bucket_begin = 0;
  auto add = [&](std::string name, Shape global, ShardKind shard, int parts, int layer, bool decay,
                 float init_std, float init_value) {
    Shape local = global;
    if (shard == ShardKind::kRows) local[0] = (name == "wte" ? out.padded_vocab : global[0]) / tp;
    if (shard == ShardKind::kCols) local[1] = global[1] / tp;
    ParamInfo p{std::move(name), local,  std::move(global),        shard, parts,    out.total,
                layer,           bucket, out.total - bucket_begin, decay, init_std, init_value};
    out.total += p.numel();
    out.params.push_back(std::move(p));
  };
  auto close_bucket = [&] {
    out.buckets.emplace_back(bucket_begin, out.total);
    bucket_begin = out.total;
    ++bucket;
  };
  for (const ChunkSpec& chunk : chunks) {
    if (chunk.embedding) {
      add("wte", {m.vocab, c}, ShardKind::kRows, 1, -1, true, std, 0);
      add("wpe", {m.max_seq, c}, ShardKind::kReplicated, 1, -1, true, std, 0);
      close_bucket();
    }
    for (int l = chunk.first_layer; l < chunk.first_layer + chunk.num_layers; ++l) {
      const std::string h = "h." + std::to_string(l) + ".";
      add(h + "ln_1.weight", {c}, ShardKind::kReplicated, 1, l, false, 0, 1);
      add(h + "ln_1.bias", {c}, ShardKind::kReplicated, 1, l, false, 0, 0);
      add(h + "attn.c_attn.weight", {3 * c, c}, ShardKind::kRows, 3, l, true, std, 0);
      add(h + "attn.c_attn.bias", {3 * c}, ShardKind::kRows, 3, l, false, 0, 0);
      add(h + "attn.c_proj.weight", {c, c}, ShardKind::kCols, 1, l, true, proj_std, 0);
      add(h + "attn.c_proj.bias", {c}, ShardKind::kReplicated, 1, l, false, 0, 0);
      add(h + "ln_2.weight", {c}, ShardKind::kReplicated, 1, l, false, 0, 1);
      add(h + "ln_2.bias", {c}, ShardKind::kReplicated, 1, l, false, 0, 0);
      add(h + "mlp.c_fc.weight", {4 * c, c}, ShardKind::kRows, 1, l, true, std, 0);
      add(h + "mlp.c_fc.bias", {4 * c}, ShardKind::kRows, 1, l, false, 0, 0);
      add(h + "mlp.c_proj.weight", {c, 4 * c}, ShardKind::kCols, 1, l, true, proj_std, 0);
      add(h + "mlp.c_proj.bias", {c}, ShardKind::kReplicated, 1, l, false, 0, 0);
      close_bucket();
    }
    if (chunk.head) {
      add("ln_f.weight", {c}, ShardKind::kReplicated, 1, -1, false, 0, 1);
      add("ln_f.bias", {c}, ShardKind::kReplicated, 1, -1, false, 0, 0);
      close_bucket();
    }
  }
  return out;
}

std::vector<ChunkSpec> RankChunks(const ModelConfig& m, const Layout& lay, int rank) {
  const int pp_rank = lay.CoordOf(rank).pp;
  const int chunks_total = lay.pp * lay.vpp;
  const int per_chunk = static_cast<int>(m.layers) / chunks_total;
  std::vector<ChunkSpec> chunks;
  for (int k = 0; k < lay.vpp; ++k) {
    const int g = k * lay.pp + pp_rank;
    chunks.push_back({g * per_chunk, per_chunk, g == 0, g == chunks_total - 1});
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
