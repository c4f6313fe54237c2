// Erasure-coded replication over a stripe group of ranks as threads (comm/local), over both bulk
// transports: after Replicate, every member keeps the parities of its rows exactly as an RS
// encode of the members' pieces computes them, with each row's manifest; members with images of
// different sizes are padded alike; a member that never replicates is named at the deadline.
#include "fault/snapshot/replicator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "comm/local/local_backend.h"
#include "core/crc32c.h"

namespace loom {
namespace {

struct Case {
  int n, k, m;
  BulkKind kind;
};

std::string Job() {
  return "repltest" + std::to_string(::getpid());
}

uint64_t ImageBytes(int member) {
  return 20000 + 3000 * static_cast<uint64_t>(member);
}
char Byte(int member, uint64_t i, int64_t step) {
  return static_cast<char>(i * 31 + member * 7 + step);
}

class ReplicatorTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (GetParam().kind == BulkKind::kUcx && !UcxBuilt()) GTEST_SKIP() << "no UCX in this build";
  }
  void TearDown() override { EXPECT_TRUE(RemoveSegments(JobSegmentPrefix(Job())).ok()); }
};

TEST_P(ReplicatorTest, ParitiesAreTheRowsEncoding) {
  const Case c = GetParam();
  auto world = CreateLocalWorld(c.n);
  ASSERT_TRUE(world.ok());
  SegmentGeometry g;
  g.k = c.k;
  g.m = c.m;
  g.piece_bytes = PieceBytes(ImageBytes(c.n - 1), c.k);
  std::vector<std::unique_ptr<Segment>> segs(static_cast<size_t>(c.n));
  std::vector<std::thread> threads;
  for (int r = 0; r < c.n; ++r) {
    threads.emplace_back([&, r] {
      auto comm = (*world)[r]->World();
      ASSERT_TRUE(comm.ok());
      SegmentGeometry mine = g;
      mine.image_bytes = ImageBytes(r);
      Result<Segment> seg = Segment::Create({Job(), "n" + std::to_string(r), 0, r}, mine);
      ASSERT_TRUE(seg.ok()) << seg.status().ToString();
      segs[r] = std::make_unique<Segment>(std::move(*seg));
      Result<std::unique_ptr<Replicator>> rep =
          Replicator::Create(segs[r].get(), comm->get(), {c.k, c.m}, c.kind);
      ASSERT_TRUE(rep.ok()) << rep.status().ToString();
      for (int64_t count = 0; count < 3; ++count) {  // both slots, then the first again
        const int slot = static_cast<int>(count % 2);
        const int64_t step = 10 + count;
        ASSERT_TRUE(segs[r]->Begin(slot, step, "").ok());
        for (uint64_t i = 0; i < ImageBytes(r); ++i) segs[r]->image(slot)[i] = Byte(r, i, step);
        const std::vector<uint32_t> crcs = segs[r]->Seal(slot, ImageBytes(r));
        Status st = (*rep)->Replicate(slot, step, count, crcs);
        ASSERT_TRUE(st.ok()) << st.ToString();
        // As the save engine's vote does: the next save starts once every member is done.
        ASSERT_TRUE((*comm)->Barrier().ok());
      }
      ASSERT_TRUE((*comm)->Barrier().ok());
    });
  }
  for (std::thread& t : threads) t.join();
  if (HasFatalFailure()) return;
  // The check, independently: encode every row from the members' images.
  Result<StripeLayout> s = StripeLayout::Create(c.n, c.k, c.m);
  Result<ReedSolomon> rs = ReedSolomon::Create(c.k, c.m);
  ASSERT_TRUE(s.ok() && rs.ok());
  const uint64_t P = g.piece_bytes;
  const int slot = 0;  // count 2 went to slot 0
  for (int row = 0; row < c.n; ++row) {
    std::vector<const uint8_t*> data;
    for (int t = 0; t < c.k; ++t) {
      data.push_back(reinterpret_cast<const uint8_t*>(segs[s->DataMember(row, t)]->image(slot) +
                                                      static_cast<uint64_t>(t) * P));
    }
    std::vector<std::vector<uint8_t>> par(static_cast<size_t>(c.m), std::vector<uint8_t>(P));
    std::vector<uint8_t*> pp;
    for (auto& v : par) pp.push_back(v.data());
    rs->Encode(P, data.data(), pp.data());
    for (int p = 0; p < c.m; ++p) {
      const Segment& holder = *segs[s->ParityMember(row, p)];
      const SlotInfo info = holder.ReadSlot(slot);
      ASSERT_TRUE(info.valid);
      EXPECT_EQ(info.step, 12);
      EXPECT_EQ(info.parities[p].row, row);
      EXPECT_TRUE(holder.ParityIntact(slot, info, p));
      EXPECT_EQ(0, std::memcmp(holder.parity(slot, p), par[p].data(), P))
          << "row " << row << " parity " << p;
      for (int t = 0; t < c.k; ++t) {
        EXPECT_EQ(info.parities[p].crcs[t], Crc32c(data[t], P));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Codes, ReplicatorTest,
    ::testing::Values(Case{4, 2, 1, BulkKind::kComm}, Case{4, 2, 1, BulkKind::kUcx},
                      Case{4, 2, 2, BulkKind::kComm}, Case{6, 4, 2, BulkKind::kUcx},
                      Case{5, 3, 1, BulkKind::kUcx}, Case{2, 1, 1, BulkKind::kComm}),
    [](const auto& info) {
      const Case& c = info.param;
      return "n" + std::to_string(c.n) + "_RS" + std::to_string(c.k) + std::to_string(c.m) +
             (c.kind == BulkKind::kUcx ? "_ucx" : "_comm");
    });

}  // namespace
}  // namespace loom
