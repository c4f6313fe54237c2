// Region intersection against brute force: boxes cut by tensor parallelism, flat ranges cut by
// ZeRO shard boundaries.
#include "checkpoint/region.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace loom {
namespace {

// Global element index -> position inside the region's flat range, for every element it holds.
std::map<int64_t, int64_t> Elements(const Region& r, int64_t gcols) {
  std::map<int64_t, int64_t> out;
  for (int64_t i = r.flat_begin; i < r.flat_end; ++i) {
    out[(r.row0 + i / r.cols) * gcols + r.col0 + i % r.cols] = i - r.flat_begin;
  }
  return out;
}

Region RandomRegion(std::mt19937& rng, int64_t grows, int64_t gcols) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Region r;
  r.row0 = pick(0, grows - 1);
  r.rows = pick(1, grows - r.row0);
  r.col0 = pick(0, gcols - 1);
  r.cols = pick(1, gcols - r.col0);
  r.flat_begin = pick(0, r.rows * r.cols - 1);
  r.flat_end = pick(r.flat_begin + 1, r.rows * r.cols);
  return r;
}

TEST(Region, IntersectMatchesBruteForce) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t grows = 1 + trial % 13, gcols = 1 + (trial / 13) % 11;
    const Region a = RandomRegion(rng, grows, gcols), b = RandomRegion(rng, grows, gcols);
    ASSERT_TRUE(a.ValidIn(grows, gcols));
    std::vector<CopySegment> segs;
    const int64_t n = Intersect(a, b, &segs);
    const auto ea = Elements(a, gcols), eb = Elements(b, gcols);
    std::map<int64_t, int64_t> expected;  // a position -> b position
    for (const auto& [g, pa] : ea) {
      auto it = eb.find(g);
      if (it != eb.end()) expected[pa] = it->second;
    }
    std::map<int64_t, int64_t> got;
    for (const CopySegment& s : segs) {
      for (int64_t k = 0; k < s.count; ++k) {
        ASSERT_TRUE(got.emplace(s.src + k, s.dst + k).second) << "element copied twice";
      }
    }
    ASSERT_EQ(n, static_cast<int64_t>(expected.size())) << a.ToString() << " x " << b.ToString();
    ASSERT_EQ(got, expected) << a.ToString() << " x " << b.ToString();
  }
}

TEST(Region, ContiguousRunsAreMerged) {
  // Two identical full-width boxes: one run.
  Region r{2, 3, 0, 8, 0, 24};
  std::vector<CopySegment> segs;
  EXPECT_EQ(Intersect(r, r, &segs), 24);
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_EQ(segs[0].count, 24);
  // A column slab of a row-major box: one run per row.
  Region slab{2, 3, 4, 2, 0, 6};
  segs.clear();
  EXPECT_EQ(Intersect(r, slab, &segs), 6);
  EXPECT_EQ(segs.size(), 3u);
}

TEST(Region, ValidInRejectsOutOfShape) {
  EXPECT_FALSE((Region{0, 5, 0, 2, 0, 10}).ValidIn(4, 2));  // rows past the tensor
  EXPECT_FALSE((Region{0, 2, 0, 2, 3, 5}).ValidIn(4, 2));   // flat range past the box
  EXPECT_TRUE((Region{1, 2, 0, 2, 1, 4}).ValidIn(4, 2));
}

}  // namespace
}  // namespace loom
