// The caching allocator's policy over real host memory: reuse within a stream and not across,
// the 2x fit rule, accounting by category with peaks, the retry after emptying the cache when the
// raw memory is exhausted, and errors for foreign pointers and exhaustion naming the category.
#include "core/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace loom {
namespace {

TEST(CachingAllocator, ReusesFreedBlocksOfTheSameStream) {
  HostMemory host;
  CachingAllocator a(&host);
  auto p = a.Allocate(1000, MemTag::kActivations, /*stream=*/1);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::memset(*p, 0xab, 1000);  // real memory
  ASSERT_TRUE(a.Free(*p).ok());
  EXPECT_EQ(a.cached_bytes(), 1024);
  // Same stream, a size that rounds to the same block: the same memory, no new raw allocation.
  auto q = a.Allocate(900, MemTag::kGrads, 1);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, *p);
  EXPECT_EQ(a.raw_mallocs(), 1);
  EXPECT_EQ(a.cached_bytes(), 0);
  // Another stream never gets a block freed on stream 1.
  ASSERT_TRUE(a.Free(*q).ok());
  auto r = a.Allocate(900, MemTag::kGrads, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(*r, *p);
  EXPECT_EQ(a.raw_mallocs(), 2);
  EXPECT_EQ(a.reserved_bytes(), 2048);
  ASSERT_TRUE(a.Free(*r).ok());
}

TEST(CachingAllocator, ALargeCachedBlockDoesNotServeASmallRequest) {
  HostMemory host;
  CachingAllocator a(&host);
  auto big = a.Allocate(1 << 20, MemTag::kParams);
  ASSERT_TRUE(big.ok());
  ASSERT_TRUE(a.Free(*big).ok());
  auto small = a.Allocate(1000, MemTag::kParams);  // 1 MiB > 2 x 1 KiB: not reused
  ASSERT_TRUE(small.ok());
  EXPECT_NE(*small, *big);
  auto half = a.Allocate((1 << 19) + 512, MemTag::kParams);  // within 2x: the cached 1 MiB
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(*half, *big);
  ASSERT_TRUE(a.Free(*small).ok());
  ASSERT_TRUE(a.Free(*half).ok());
}

TEST(CachingAllocator, AccountsRequestedBytesByCategoryWithPeaks) {
  HostMemory host;
  CachingAllocator a(&host);
  auto w = a.Allocate(3000, MemTag::kParams);
  auto g1 = a.Allocate(100, MemTag::kGrads);
  auto g2 = a.Allocate(200, MemTag::kGrads);
  ASSERT_TRUE(w.ok() && g1.ok() && g2.ok());
  EXPECT_EQ(a.usage(MemTag::kParams).current, 3000);
  EXPECT_EQ(a.usage(MemTag::kGrads).current, 300);
  ASSERT_TRUE(a.Free(*g1).ok());
  EXPECT_EQ(a.usage(MemTag::kGrads).current, 200);
  EXPECT_EQ(a.usage(MemTag::kGrads).peak, 300);
  EXPECT_EQ(a.usage(MemTag::kOptimizer).current, 0);
  const std::string report = a.Report();
  EXPECT_NE(report.find("params"), std::string::npos) << report;
  EXPECT_NE(report.find("on host"), std::string::npos) << report;
  ASSERT_TRUE(a.Free(*w).ok());
  ASSERT_TRUE(a.Free(*g2).ok());
  a.EmptyCache();
  EXPECT_EQ(a.reserved_bytes(), 0);
}

TEST(CachingAllocator, EmptiesItsCacheBeforeGivingUp) {
  HostMemory host(/*capacity=*/8192);
  CachingAllocator a(&host);
  auto x = a.Allocate(4096, MemTag::kActivations, 1);
  auto y = a.Allocate(4096, MemTag::kActivations, 2);
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_TRUE(a.Free(*x).ok());
  ASSERT_TRUE(a.Free(*y).ok());
  // 6 KiB on stream 3: no cached block of stream 3, the pool is full of cached blocks: they are
  // returned and the request succeeds.
  auto z = a.Allocate(6000, MemTag::kComm, 3);
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  EXPECT_EQ(a.cached_bytes(), 0);
  // Now the pool is exhausted for real: the error names the category, the size and the usage.
  auto w = a.Allocate(4096, MemTag::kOptimizer, 3);
  ASSERT_FALSE(w.ok());
  const std::string msg = w.status().message();
  EXPECT_NE(msg.find("optimizer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4096 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("comm 0.0 MiB"), std::string::npos) << msg;  // what is in use, by category
  ASSERT_TRUE(a.Free(*z).ok());
}

TEST(CachingAllocator, RefusesForeignPointersAndDoubleFrees) {
  HostMemory host;
  CachingAllocator a(&host);
  int local = 0;
  EXPECT_FALSE(a.Free(&local).ok());
  auto p = a.Allocate(64, MemTag::kOther);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(a.Free(*p).ok());
  const Status again = a.Free(*p);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find("freed twice"), std::string::npos);
  EXPECT_FALSE(a.Allocate(0, MemTag::kOther).ok());
}

}  // namespace
}  // namespace loom
