// `loom ckpt diff` as a library call: two checkpoints compared tensor by tensor, whatever layout
// each was saved with. Every tensor's consolidated states (fp32 weight, Adam m, Adam v) are read
// from both (checksums verified on the way), one tensor at a time: memory about twice the
// largest tensor. Elements are compared bit for bit, and by value for the tolerance check, with
// B as the reference, as numpy's allclose(a, b) does: |a - b| <= atol + rtol * |b|. By value a
// NaN equals a NaN (whatever its payload or sign) and 0.0 equals -0.0. How far apart a tensor's
// values are, relatively, is told by norms, ||a - b|| / ||b||, not by the largest elementwise
// |a - b| / |b|: that one is dominated by elements near zero (a difference of 3e-6 against a
// weight of 3e-10 reads 1e4) and says nothing about the tensor.
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
  int64_t worst = -1;      // flat index of the largest |a - b| (-1: no value differs)
  double diff_sq = 0;      // sum of (a - b)^2 over the elements (infinity as max_abs is)
  double ref_sq = 0;       // sum of b^2 over B's finite elements, whether they differ or not
};

// ||a - b|| / ||b|| (2-norms over the tensor, B the reference): 0 when no value differs,
// infinity when B is all zero (or not finite) and some value differs, or a difference is infinite.
double RelativeNorm(const StateDiff& d);

struct DiffReport {
  std::string a, b;                             // the step directories compared
  bool a_imported = false, b_imported = false;  // made by `loom ckpt import`: no training state
  std::vector<std::string> notes;  // metadata that differs: step, layout, optimizer, data, RNG
  std::vector<StateDiff> states;   // every (tensor, state) compared, canonical order
  int64_t elements = 0, differing = 0, unequal = 0, beyond_tol = 0;
};

// Adds the comparison of a[0..n) with b[0..n) (B the reference) to d's counts, maxima and sums
// (a tensor may be compared in pieces).
void CompareValues(const float* a, const float* b, int64_t n, double rtol, double atol,
                   StateDiff* d);

// `a`, `b`: step directories or roots (their newest checkpoints); `*.tmp` directories are refused,
// as loading refuses them. `weights_only`: the fp32 weights, not the Adam moments. Models of
// different shapes are an error naming every field that differs.
Result<DiffReport> DiffCheckpoints(const std::string& a, const std::string& b, double rtol,
                                   double atol, bool weights_only = false);

}  // namespace loom
