// Rank <-> coordinate math, group enumeration and validation.
#include "parallel/layout.h"

#include <algorithm>

namespace loom {

const char* GroupKindName(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTensor:
      return "tp";
    case GroupKind::kContext:
      return "cp";
    case GroupKind::kData:
      return "dp";
    case GroupKind::kPipeline:
      return "pp";
    case GroupKind::kDataContext:
      return "dp-cp";
    case GroupKind::kEmbedding:
      return "embedding";
  }
  return "?";
}

Coord Layout::CoordOf(int rank) const {
  Coord c;
  c.tp = rank % tp;
  rank /= tp;
  c.cp = rank % cp;
  rank /= cp;
  c.dp = rank % dp;
  c.pp = rank / dp;
  return c;
}

std::vector<int> Layout::GroupOf(GroupKind kind, int rank) const {
  Coord c = CoordOf(rank);
  std::vector<int> out;
  switch (kind) {
    case GroupKind::kTensor:
      for (int i = 0; i < tp; ++i) out.push_back(RankOf({i, c.cp, c.dp, c.pp}));
      break;
    case GroupKind::kContext:
      for (int i = 0; i < cp; ++i) out.push_back(RankOf({c.tp, i, c.dp, c.pp}));
      break;
    case GroupKind::kData:
      for (int i = 0; i < dp; ++i) out.push_back(RankOf({c.tp, c.cp, i, c.pp}));
      break;
    case GroupKind::kPipeline:
      for (int i = 0; i < pp; ++i) out.push_back(RankOf({c.tp, c.cp, c.dp, i}));
      break;
    case GroupKind::kDataContext:  // cp varies fastest: index = cp + cp_size * dp
      for (int d = 0; d < dp; ++d)
        for (int i = 0; i < cp; ++i) out.push_back(RankOf({c.tp, i, d, c.pp}));
      break;
    case GroupKind::kEmbedding:
      if (c.pp == 0 || c.pp == pp - 1) {
        out.push_back(RankOf({c.tp, c.cp, c.dp, 0}));
        if (pp > 1) out.push_back(RankOf({c.tp, c.cp, c.dp, pp - 1}));
      }
      break;
  }
  return out;
}

std::vector<std::vector<int>> Layout::AllGroups(GroupKind kind) const {
  std::vector<std::vector<int>> out;
  std::vector<char> seen(static_cast<size_t>(world()), 0);
  for (int r = 0; r < world(); ++r) {
    if (seen[static_cast<size_t>(r)]) continue;
    std::vector<int> g = GroupOf(kind, r);
    if (g.empty()) continue;
    for (int m : g) seen[static_cast<size_t>(m)] = 1;
    out.push_back(std::move(g));
  }
  return out;
}

Status Layout::Validate(int world_size, const LayoutConstraints& m) const {
  auto bad = [](const std::string& s) { return InvalidArgument("parallel layout: " + s); };
  auto n = [](int64_t v) { return std::to_string(v); };
  if (tp < 1 || cp < 1 || pp < 1 || vpp < 1 || dp < 1)
    return bad("tp, cp, pp, vpp and dp must be >= 1");
  if (zero < 0 || zero > 3) return bad("zero must be 0, 1, 2 or 3 (got " + n(zero) + ")");
  if (world_size > 0 && world() != world_size) {
    return bad("tp*cp*dp*pp = " + n(tp) + "*" + n(cp) + "*" + n(dp) + "*" + n(pp) + " = " +
               n(world()) + " must equal the number of ranks (" + n(world_size) + ")");
  }
  if (m.heads > 0 && m.heads % tp != 0) {
    return bad("model.heads (" + n(m.heads) + ") must be divisible by tp (" + n(tp) + ")");
  }
  const int64_t ffn = m.ffn > 0 ? m.ffn : 4 * m.hidden;
  if (ffn > 0 && ffn % tp != 0) {
    return bad("the MLP width (" + n(ffn) + ") must be divisible by tp (" + n(tp) + ")");
  }
  if (m.kv_heads > 0 && m.kv_heads % tp != 0 && tp % m.kv_heads != 0) {
    return bad("model.kv_heads (" + n(m.kv_heads) + ") and tp (" + n(tp) +
               ") must divide one another (KV heads are split over tp, or replicated when fewer)");
  }
  if (m.layers > 0) {
    Result<std::vector<int>> split = ChunkLayers(m.layers);
    if (!split.ok()) return bad(split.status().message());
  }
  if (vpp > 1 && pp < 2) return bad("vpp (" + n(vpp) + ") > 1 needs pp >= 2");
  if (m.seq > 0 && cp > 1 && m.seq % (2 * cp) != 0) {
    return bad("data.seq (" + n(m.seq) + ") must be divisible by 2*cp (" + n(2 * cp) +
               ") for the load-balanced causal split");
  }
  if (m.seq > 0 && sp && tp > 1 && (m.seq / cp) % tp != 0) {
    return bad("with sequence parallelism the per-rank sequence seq/cp (" + n(m.seq / cp) +
               ") must be divisible by tp (" + n(tp) + ")");
  }
  if (m.global_batch > 0) {
    if (m.global_batch % dp != 0) {
      return bad("data.global_batch (" + n(m.global_batch) + ") must be divisible by dp (" + n(dp) +
                 ")");
    }
    const int64_t per_rank = m.global_batch / dp;
    if (m.micro_batch > 0 && per_rank % m.micro_batch != 0) {
      return bad("global_batch/dp (" + n(per_rank) + ") must be divisible by data.micro_batch (" +
                 n(m.micro_batch) + ")");
    }
  }
  return Status::Ok();
}

Result<std::vector<int>> Layout::ChunkLayers(int64_t layers) const {
  auto n = [](int64_t v) { return std::to_string(v); };
  const int64_t chunks = int64_t(pp) * vpp;
  if (!uneven()) {
    if (layers % chunks != 0) {
      return InvalidArgument("model.layers (" + n(layers) + ") must be divisible by pp*vpp (" +
                             n(pp) + "*" + n(vpp) + " = " + n(chunks) + ")" +
                             UnevenHint(layers, chunks));
    }
    return std::vector<int>(static_cast<size_t>(chunks), static_cast<int>(layers / chunks));
  }
  if (chunks < 2) {
    return InvalidArgument("parallel.first_stage_layers / last_stage_layers need pp*vpp >= 2");
  }
  if (first_stage_layers < 0 || last_stage_layers < 0) {
    return InvalidArgument("parallel.first_stage_layers / last_stage_layers must be >= 1");
  }
  const int64_t fixed = first_stage_layers + last_stage_layers;
  const int64_t others = chunks - (first_stage_layers > 0) - (last_stage_layers > 0);
  const int64_t rest = layers - fixed;
  const std::string what = "model.layers (" + n(layers) + ") minus first_stage_layers (" +
                           n(first_stage_layers) + ") and last_stage_layers (" +
                           n(last_stage_layers) + ") = " + n(rest);
  if (rest < 0 || (others == 0 && rest != 0)) {
    return InvalidArgument(what + " must be " +
                           (others == 0 ? "0 (there are no other stages)" : "at least 0"));
  }
  if (others > 0 && (rest % others != 0 || rest == 0)) {
    return InvalidArgument(what + " must be a positive multiple of the " + n(others) +
                           " other pipeline chunks (pp*vpp = " + n(chunks) + ")");
  }
  std::vector<int> out(static_cast<size_t>(chunks),
                       others > 0 ? static_cast<int>(rest / others) : 0);
  if (first_stage_layers > 0) out.front() = first_stage_layers;
  if (last_stage_layers > 0) out.back() = last_stage_layers;
  return out;
}

std::string UnevenHint(int64_t layers, int64_t chunks) {
  if (chunks < 3 || layers < chunks) return "";
  // The lightest symmetric split: `mid` on every middle chunk, the rest shared by the two ends.
  const int64_t mid = (layers + chunks - 1) / chunks;
  const int64_t ends = layers - (chunks - 2) * mid;
  if (ends < 2 || ends > 2 * mid) return "";
  const int64_t first = ends / 2, last = ends - first;
  return ", or set parallel.first_stage_layers: " + std::to_string(first) +
         " and last_stage_layers: " + std::to_string(last) + " (" + std::to_string(mid) +
         " on each of the " + std::to_string(chunks - 2) + " other chunks)";
}

std::string Layout::ToString() const {
  std::string s = "tp=" + std::to_string(tp) + " cp=" + std::to_string(cp) +
                  " pp=" + std::to_string(pp) + " vpp=" + std::to_string(vpp) +
                  " dp=" + std::to_string(dp) + " zero=" + std::to_string(zero) +
                  " sp=" + (sp ? "on" : "off");
  if (first_stage_layers > 0) s += " first_stage_layers=" + std::to_string(first_stage_layers);
  if (last_stage_layers > 0) s += " last_stage_layers=" + std::to_string(last_stage_layers);
  return s;
}

}  // namespace loom
