// `loom ckpt diff` as a library call: two checkpoints compared tensor by tensor, whatever layout
// each was saved with. Every tensor's consolidated states (fp32 weight, Adam m, Adam v) are read
// from both (checksums verified on the way), one tensor at a time: memory about twice the
// largest tensor. Elements are compared bit for bit, and by value for the tolerance check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/shard_plan.h"  // StateKind
#include "core/status.h"

namespace loom {

struct StateDiff {
  std::string tensor;  // canonical name
  StateKind state = StateKind::kParam;
  int64_t elements = 0;
  int64_t differing = 0;  // elements whose bits differ
  int64_t beyond_tol =
      0;               // elements outside the tolerance (numpy allclose: |a-b| <= atol + rtol*|b|)
  double max_abs = 0;  // largest |a - b|
  double max_rel = 0;  // largest |a - b| / max(|a|, |b|)
  int64_t worst = -1;  // flat index of the largest |a - b| (-1: none differ)
};

struct DiffReport {
  std::string a, b;                // the step directories compared
  std::vector<std::string> notes;  // metadata that differs: step, layout, optimizer, data position
  std::vector<StateDiff> states;   // every (tensor, state), canonical order
  int64_t elements = 0, differing = 0, beyond_tol = 0;
};

// `a`, `b`: step directories or roots (their newest checkpoints). A model that differs (vocab,
// layers, ...) is an error naming the field: such checkpoints have no tensors in common.
Result<DiffReport> DiffCheckpoints(const std::string& a, const std::string& b, double rtol,
                                   double atol);

}  // namespace loom
