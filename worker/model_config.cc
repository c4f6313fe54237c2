// Parameter layout and seeded initialisation.
#include "worker/model_config.h"

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

ParamLayout ParamLayout::ForModel(const ModelConfig& m) {
  ParamLayout out;
  const int64_t c = m.hidden;
  const float std = 0.02f;
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(m.layers));
  auto add = [&](std::string name, Shape shape, int layer, bool decay, float init_std,
                 float init_value) {
    ParamInfo p{std::move(name), std::move(shape), out.total, layer, decay, init_std, init_value};
    out.total += p.numel();
    out.params.push_back(std::move(p));
  };
  add("wte", {m.vocab, c}, -1, true, std, 0);
  add("wpe", {m.max_seq, c}, -1, true, std, 0);
  for (int l = 0; l < m.layers; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    const int64_t begin = out.total;
    add(h + "ln_1.weight", {c}, l, false, 0, 1);
    add(h + "ln_1.bias", {c}, l, false, 0, 0);
    add(h + "attn.c_attn.weight", {3 * c, c}, l, true, std, 0);
    add(h + "attn.c_attn.bias", {3 * c}, l, false, 0, 0);
    add(h + "attn.c_proj.weight", {c, c}, l, true, proj_std, 0);
    add(h + "attn.c_proj.bias", {c}, l, false, 0, 0);
    add(h + "ln_2.weight", {c}, l, false, 0, 1);
    add(h + "ln_2.bias", {c}, l, false, 0, 0);
    add(h + "mlp.c_fc.weight", {4 * c, c}, l, true, std, 0);
    add(h + "mlp.c_fc.bias", {4 * c}, l, false, 0, 0);
    add(h + "mlp.c_proj.weight", {c, 4 * c}, l, true, proj_std, 0);
    add(h + "mlp.c_proj.bias", {c}, l, false, 0, 0);
    out.layer_ranges.emplace_back(begin, out.total);
  }
  add("ln_f.weight", {c}, -1, false, 0, 1);
  add("ln_f.bias", {c}, -1, false, 0, 0);
  return out;
}

const ParamInfo* ParamLayout::Find(const std::string& name) const {
  for (const ParamInfo& p : params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

void InitParams(const ParamLayout& layout, uint64_t seed, float* data) {
  for (const ParamInfo& p : layout.params) {
    float* d = data + p.offset;
    const int64_t n = p.numel();
    if (p.init_std > 0) {
      const uint64_t stream = HashString(p.name.c_str());
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        d[i] = static_cast<float>(NormalAt(seed, stream, static_cast<uint64_t>(i)) * p.init_std);
      }
    } else {
      for (int64_t i = 0; i < n; ++i) d[i] = p.init_value;
    }
  }
}

}  // namespace loom
