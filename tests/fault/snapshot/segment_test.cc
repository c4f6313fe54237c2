// Snapshot segments in /dev/shm: two slots written, sealed and read back after the writer is
// gone; a flipped byte fails its piece's digest; a torn header reads as invalid; segments are
// found and removed by job and node prefix, and nothing is left behind.
#include "fault/snapshot/segment.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "core/crc32c.h"

namespace loom {
namespace {

class SegmentTest : public ::testing::Test {
 protected:
  void SetUp() override { job_ = "segtest" + std::to_string(::getpid()); }
  void TearDown() override {
    Result<int> removed = RemoveSegments(JobSegmentPrefix(job_));
    EXPECT_TRUE(removed.ok());
  }
  SegmentIdentity Id(const std::string& node, int rank) const { return {job_, node, 3, rank}; }
  static SegmentGeometry Geo() {
    SegmentGeometry g;
    g.image_bytes = 10000;
    g.piece_bytes = 5056;  // 2 pieces, padded
    g.k = 2;
    g.m = 1;
    return g;
  }
  std::string job_;
};

TEST_F(SegmentTest, SlotsOutliveTheirWriterAndCheckTheirDigests) {
  {
    Result<Segment> s = Segment::Create(Id("node0", 5), Geo());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE(s->Begin(1, 42, "description of step 42").ok());
    for (int i = 0; i < 10000; ++i) s->image(1)[i] = static_cast<char>(i * 7);
    const std::vector<uint32_t> crcs = s->Seal(1, 10000);
    ASSERT_EQ(crcs.size(), 2u);
    EXPECT_EQ(crcs[0], Crc32c(s->image(1), 5056));
    std::memset(s->parity(1, 0), 9, 5056);
    RowManifest row{2, {crcs[0], 77, Crc32c(s->parity(1, 0), 5056)}};
    s->SetParity(1, 0, row);
    s->MarkReplicated(1);
  }  // unmapped: only /dev/shm holds it now
  Result<Segment> s = Segment::Open(Id("node0", 5));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const SlotInfo empty = s->ReadSlot(0);
  EXPECT_TRUE(empty.valid);
  EXPECT_EQ(empty.state, SlotState::kEmpty);
  const SlotInfo info = s->ReadSlot(1);
  ASSERT_TRUE(info.valid);
  EXPECT_EQ(info.state, SlotState::kReplicated);
  EXPECT_EQ(info.step, 42);
  EXPECT_EQ(info.image_bytes, 10000u);
  EXPECT_EQ(info.parities[0].row, 2);
  EXPECT_TRUE(s->PieceIntact(1, info, 0));
  EXPECT_TRUE(s->PieceIntact(1, info, 1));
  EXPECT_TRUE(s->ParityIntact(1, info, 0));
  EXPECT_EQ(s->image(1)[9999], static_cast<char>(9999 * 7));
  EXPECT_EQ(s->image(1)[10000], 0);  // padding zeroed by Seal
  Result<std::string> meta = s->ReadMeta(1);
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(*meta, "description of step 42");

  s->image(1)[6000] ^= 1;  // a flipped bit in piece 1
  EXPECT_TRUE(s->PieceIntact(1, info, 0));
  EXPECT_FALSE(s->PieceIntact(1, info, 1));
  s->parity(1, 0)[0] ^= 1;
  EXPECT_FALSE(s->ParityIntact(1, info, 0));
}

TEST_F(SegmentTest, ATornHeaderIsInvalidAndBeginInvalidatesTheOldSave) {
  Result<Segment> s = Segment::Create(Id("n", 0), Geo());
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->Begin(0, 7, "").ok());
  s->Seal(0, 100);
  EXPECT_EQ(s->ReadSlot(0).state, SlotState::kSealed);
  // A crash in the middle of a header update: the step changed, the checksum did not.
  const uint64_t off = s->geometry().SlotOffset(0) + 8;  // SlotHeader::step
  int64_t other = 8;
  std::memcpy(s->base() + off, &other, sizeof(other));
  EXPECT_FALSE(s->ReadSlot(0).valid);
  ASSERT_TRUE(s->Begin(0, 9, "").ok());
  const SlotInfo info = s->ReadSlot(0);
  EXPECT_TRUE(info.valid);
  EXPECT_EQ(info.state, SlotState::kWriting);
  EXPECT_FALSE(s->PieceIntact(0, info, 0));  // writing: not a snapshot yet
}

TEST_F(SegmentTest, OpenRefusesOtherSegmentsByName) {
  ASSERT_TRUE(Segment::Create(Id("n", 1), Geo()).ok());
  Result<Segment> missing = Segment::Open(Id("n", 2));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(SegmentName(Id("n", 2))), std::string::npos);
  // Garbage under a segment's name.
  const std::string name = "/" + SegmentName(Id("n", 4));
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 8192), 0);
  ::close(fd);
  Result<Segment> bad = Segment::Open(Id("n", 4));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("not a Loom snapshot segment"), std::string::npos);
}

TEST_F(SegmentTest, SegmentsAreRemovedByNodeAndByJob) {
  for (const char* node : {"a", "b"}) {
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(Segment::Create(Id(node, r), Geo()).ok());
  }
  Result<int> a = RemoveSegments(NodeSegmentPrefix(job_, "a"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 2);
  EXPECT_FALSE(Segment::Open(Id("a", 0)).ok());
  EXPECT_TRUE(Segment::Open(Id("b", 0)).ok());
  Result<int> all = RemoveSegments(JobSegmentPrefix(job_));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, 2);
}

TEST_F(SegmentTest, GeometryLimitsAreChecked) {
  SegmentGeometry g = Geo();
  g.image_bytes = 20000;  // more than k pieces
  EXPECT_FALSE(Segment::Create(Id("n", 0), g).ok());
  g = Geo();
  g.k = kMaxSnapshotK + 1;
  EXPECT_FALSE(Segment::Create(Id("n", 0), g).ok());
  Result<Segment> s = Segment::Create(Id("n", 0), Geo());
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->Begin(0, 1, std::string(kMetaCapacity + 1, 'x')).ok());
}

}  // namespace
}  // namespace loom
