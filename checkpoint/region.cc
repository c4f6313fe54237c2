// Region overlap, row by row: inside one row both regions hold one contiguous column run.
#include "checkpoint/region.h"

#include <algorithm>

namespace loom {
namespace {

// Columns [lo, hi) (global) that `r` holds in global row `row` (lo >= hi: none).
void RowSpan(const Region& r, int64_t row, int64_t* lo, int64_t* hi) {
  const int64_t i = row - r.row0;
  const int64_t a = std::max(i * r.cols, r.flat_begin), b = std::min((i + 1) * r.cols, r.flat_end);
  *lo = r.col0 + a - i * r.cols;
  *hi = r.col0 + b - i * r.cols;
}

// Global rows that hold at least one element of `r`.
void RowRange(const Region& r, int64_t* first, int64_t* last) {
  if (r.cols <= 0 || r.flat_end <= r.flat_begin) {
    *first = *last = 0;
    return;
  }
  *first = r.row0 + r.flat_begin / r.cols;
  *last = r.row0 + (r.flat_end + r.cols - 1) / r.cols;
}

}  // namespace

bool Region::ValidIn(int64_t global_rows, int64_t global_cols) const {
  return row0 >= 0 && rows >= 0 && col0 >= 0 && cols >= 0 && row0 + rows <= global_rows &&
         col0 + cols <= global_cols && flat_begin >= 0 && flat_begin <= flat_end &&
         flat_end <= rows * cols;
}

std::string Region::ToString() const {
  return "rows " + std::to_string(row0) + ".." + std::to_string(row0 + rows) + " cols " +
         std::to_string(col0) + ".." + std::to_string(col0 + cols) + " flat " +
         std::to_string(flat_begin) + ".." + std::to_string(flat_end);
}

int64_t Intersect(const Region& src, const Region& dst, std::vector<CopySegment>* out) {
  int64_t s_first, s_last, d_first, d_last;
  RowRange(src, &s_first, &s_last);
  RowRange(dst, &d_first, &d_last);
  const int64_t first = std::max(s_first, d_first), last = std::min(s_last, d_last);
  int64_t covered = 0;
  for (int64_t row = first; row < last; ++row) {
    int64_t slo, shi, dlo, dhi;
    RowSpan(src, row, &slo, &shi);
    RowSpan(dst, row, &dlo, &dhi);
    const int64_t lo = std::max(slo, dlo), hi = std::min(shi, dhi);
    if (lo >= hi) continue;
    CopySegment seg{(row - src.row0) * src.cols + (lo - src.col0) - src.flat_begin,
                    (row - dst.row0) * dst.cols + (lo - dst.col0) - dst.flat_begin, hi - lo};
    covered += seg.count;
    if (!out->empty()) {
      CopySegment& prev = out->back();
      if (prev.src + prev.count == seg.src && prev.dst + prev.count == seg.dst) {
        prev.count += seg.count;
        continue;
      }
    }
    out->push_back(seg);
  }
  return covered;
}

}  // namespace loom
