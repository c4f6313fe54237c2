// ModelSpec / LayoutSpec to and from ModelConfig / Layout.
#include "checkpoint/metadata_specs.h"
#include "model/config.h"

#include <algorithm>

namespace loom {

void SetModelSpec(const ModelConfig& model, proto::ModelSpec* spec) {
  spec->set_arch("gpt2");
  spec->set_vocab(model.vocab);
  spec->set_max_seq(model.max_seq);
  spec->set_layers(model.layers);
  spec->set_heads(model.heads);
  spec->set_hidden(model.hidden);
}

ModelConfig ModelOf(const proto::ModelSpec& spec) {
  return ModelConfig{spec.vocab(), spec.max_seq(), spec.layers(), spec.heads(), spec.hidden()};
}

void SetLayoutSpec(const Layout& layout, proto::LayoutSpec* spec) {
  spec->set_tp(layout.tp);
  spec->set_cp(layout.cp);
  spec->set_pp(layout.pp);
  spec->set_vpp(layout.vpp);
  spec->set_dp(layout.dp);
  spec->set_zero(layout.zero);
  spec->set_sp(layout.sp);
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
  return l;
}

}  // namespace loom
