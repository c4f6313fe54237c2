// ModelSpec / LayoutSpec to and from ModelConfig / Layout.
#include "checkpoint/metadata_specs.h"
#include "model/config.h"

#include <algorithm>

namespace loom {

void SetModelSpec(const ModelConfig& model, proto::ModelSpec* spec) {
  spec->set_arch(ModelFamilyName(model.family));
  spec->set_vocab(model.vocab);
  spec->set_max_seq(model.max_seq);
  spec->set_layers(model.layers);
  spec->set_heads(model.heads);
  spec->set_hidden(model.hidden);
  if (model.llama()) {
    spec->set_kv_heads(model.kv());
    spec->set_ffn_hidden(model.ffn());
    spec->set_rope_theta(model.rope_theta);
    spec->set_norm_eps(model.norm_eps);
    spec->set_untied(!model.tie_embeddings);
    if (model.rope_scaling.on()) {
      proto::RopeScalingSpec* r = spec->mutable_rope_scaling();
      r->set_type("llama3");
      r->set_factor(model.rope_scaling.factor);
      r->set_low_freq_factor(model.rope_scaling.low_freq_factor);
      r->set_high_freq_factor(model.rope_scaling.high_freq_factor);
      r->set_original_max_seq(model.rope_scaling.original_max_seq);
    }
  }
}

ModelConfig ModelOf(const proto::ModelSpec& spec) {
  ModelConfig m{spec.vocab(), spec.max_seq(), spec.layers(), spec.heads(), spec.hidden()};
  if (spec.arch() == "llama") {
    m.family = ModelFamily::kLlama;
    m.kv_heads = spec.kv_heads();
    m.ffn_hidden = spec.ffn_hidden();
    if (spec.rope_theta() > 0) m.rope_theta = spec.rope_theta();
    if (spec.norm_eps() > 0) m.norm_eps = spec.norm_eps();
    m.tie_embeddings = !spec.untied();
    if (spec.has_rope_scaling()) {
      const proto::RopeScalingSpec& r = spec.rope_scaling();
      m.rope_scaling = {r.factor(), r.low_freq_factor(), r.high_freq_factor(),
                        r.original_max_seq()};
    }
  }
  return m;
}

void SetLayoutSpec(const Layout& layout, proto::LayoutSpec* spec) {
  spec->set_tp(layout.tp);
  spec->set_cp(layout.cp);
  spec->set_pp(layout.pp);
  spec->set_vpp(layout.vpp);
  spec->set_dp(layout.dp);
  spec->set_zero(layout.zero);
  spec->set_sp(layout.sp);
  spec->set_first_stage_layers(layout.first_stage_layers);
  spec->set_last_stage_layers(layout.last_stage_layers);
}

Layout LayoutOf(const proto::LayoutSpec& spec) {
  Layout l;
  l.tp = spec.tp();
  l.cp = std::max(1, spec.cp());
  l.pp = spec.pp();
  l.vpp = std::max(1, spec.vpp());
  l.dp = spec.dp();
  l.zero = spec.zero();
  l.sp = spec.sp();
  l.first_stage_layers = spec.first_stage_layers();
  l.last_stage_layers = spec.last_stage_layers();
  return l;
}

}  // namespace loom
