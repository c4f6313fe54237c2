// Regions of a global tensor and how two of them overlap: the pure index math of the universal
// checkpoint (no I/O).
//
// Every tensor is viewed as a matrix (a 1-D tensor of n elements is n x 1). A Region is a box
// (rows [row0, row0+rows), cols [col0, col0+cols)) and, in the box's row-major order, the element
// range [flat_begin, flat_end): tensor parallelism cuts boxes, a ZeRO shard boundary cuts the
// flat order inside one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

struct Region {
  int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;
  int64_t flat_begin = 0, flat_end = 0;

  int64_t size() const { return flat_end - flat_begin; }
  // flat range inside the box, box inside `global_rows` x `global_cols`.
  bool ValidIn(int64_t global_rows, int64_t global_cols) const;
  std::string ToString() const;  // "rows 0..1536 cols 0..768 flat 0..1179648"
  bool operator==(const Region&) const = default;
};

// A run of elements common to a source and a destination region: `count` elements starting at
// element `src` of the source's flat range and element `dst` of the destination's.
struct CopySegment {
  int64_t src = 0, dst = 0, count = 0;
};

// The elements of `dst` that `src` holds, as runs merged where both sides are contiguous.
// Both regions must be in the same global tensor. Returns the number of elements covered.
int64_t Intersect(const Region& src, const Region& dst, std::vector<CopySegment>* out);

}  // namespace loom
