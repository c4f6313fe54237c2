// The model and the parallel layout as checkpoint metadata records them (proto ModelSpec and
// LayoutSpec), both ways, so every writer of metadata (a training save, import, reshard) and
// every reader fills and reads the fields alike.
#pragma once

#include "model/config.h"
#include "parallel/layout.h"
#include "parallel/param_layout.h"
#include "proto/checkpoint.pb.h"

namespace loom {

// arch (the family: "gpt2" or "llama"), the five sizes and Llama's fields.
void SetModelSpec(const ModelConfig& model, proto::ModelSpec* spec);
ModelConfig ModelOf(const proto::ModelSpec& spec);
void SetLayoutSpec(const Layout& layout, proto::LayoutSpec* spec);
// cp and vpp absent (0, in some test-written files) read as 1.
Layout LayoutOf(const proto::LayoutSpec& spec);

}  // namespace loom
