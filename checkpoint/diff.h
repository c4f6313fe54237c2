// `loom ckpt diff` as a library call: two checkpoints compared tensor by tensor, whatever layout
// each was saved with. Every tensor's consolidated states (fp32 weight, Adam m, Adam v) are read
// from both (checksums verified on the way), one tensor at a time: memory about twice the
// largest tensor. Elements are compared bit for bit, and by value for the tolerance check, with
// B as the reference, as numpy's allclose(a, b) does: |a - b| <= atol + rtol * |b|. By value a
// NaN equals a NaN (whatever its payload or sign) and 0.0 equals -0.0.
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
  int64_t rows = 0, cols = 0;  // the tensor viewed as a matrix
  int64_t elements = 0;
  int64_t differing = 0;   // elements whose bits differ
  int64_t unequal = 0;     // of those, elements that differ in value too (not -0/+0, NaN/NaN)
  int64_t beyond_tol = 0;  // elements outside the tolerance
  double max_abs = 0;      // largest |a - b| (infinity: a NaN against a number, or inf - x)
  double max_rel = 0;      // largest |a - b| / |b| (infinity where b is 0)
  int64_t worst = -1;      // flat index of the largest |a - b| (-1: no value differs)
};

struct DiffReport {
  std::string a, b;                             // the step directories compared
  bool a_imported = false, b_imported = false;  // made by `loom ckpt import`: no training state
  std::vector<std::string> notes;  // metadata that differs: step, layout, optimizer, data, RNG
  std::vector<StateDiff> states;   // every (tensor, state) compared, canonical order
  int64_t elements = 0, differing = 0, unequal = 0, beyond_tol = 0;
};

// Adds the comparison of a[0..n) with b[0..n) (B the reference) to d's counts and maxima.
void CompareValues(const float* a, const float* b, int64_t n, double rtol, double atol,
                   StateDiff* d);

// `a`, `b`: step directories or roots (their newest checkpoints); `*.tmp` directories are refused,
// as loading refuses them. `weights_only`: the fp32 weights, not the Adam moments. Models of
// different shapes are an error naming every field that differs.
Result<DiffReport> DiffCheckpoints(const std::string& a, const std::string& b, double rtol,
                                   double atol, bool weights_only = false);

}  // namespace loom
