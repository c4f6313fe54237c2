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
  if (m.layers > 0 && m.layers % (int64_t(pp) * vpp) != 0) {
    return bad("model.layers (" + n(m.layers) + ") must be divisible by pp*vpp (" + n(pp) + "*" +
               n(vpp) + " = " + n(int64_t(pp) * vpp) + ")");
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

std::string Layout::ToString() const {
  return "tp=" + std::to_string(tp) + " cp=" + std::to_string(cp) + " pp=" + std::to_string(pp) +
         " vpp=" + std::to_string(vpp) + " dp=" + std::to_string(dp) +
         " zero=" + std::to_string(zero) + " sp=" + (sp ? "on" : "off");
}

}  // namespace loom
