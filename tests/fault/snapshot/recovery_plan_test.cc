// Choosing what a restarted job restores, on made-up inventories of 8 old ranks on 4 nodes in
// two stripe groups of RS(2,1): everything local; a lost node rebuilt; a save not sealed
// everywhere passed over; a damaged piece rebuilt alone; two lost nodes in one group refused
// with the reason; local-only snapshots.
#include "fault/snapshot/recovery_plan.h"

#include <gtest/gtest.h>

#include <set>

namespace loom {
namespace {

SnapshotOrigin Origin(ErasureCode code = {2, 1}) {
  SnapshotOrigin o;
  o.world = 8;
  o.code = code;
  if (code.m > 0) o.groups = {{0, 2, 4, 6}, {1, 3, 5, 7}};
  for (int r = 0; r < 8; ++r) o.rank_node.push_back("n" + std::to_string(r / 2));
  return o;
}

// Old rank r's slot for `step`, everything intact; the holder is the new rank r.
SlotReport Report(int r, int64_t step, const SnapshotOrigin& o) {
  SlotReport s;
  s.old_rank = r;
  s.slot = static_cast<int>(step % 2);
  s.holder = r;
  s.step = step;
  s.state = SlotState::kReplicated;
  s.image_bytes = 1000;
  const int k = std::max(1, o.code.k);
  s.piece_ok.assign(static_cast<size_t>(k), true);
  s.parity_ok.assign(static_cast<size_t>(o.code.m), true);
  for (int p = 0; p < o.code.m; ++p) {
    const std::vector<int>& g = o.groups[static_cast<size_t>(r % 2)];
    const int member = static_cast<int>(std::find(g.begin(), g.end(), r) - g.begin());
    Result<StripeLayout> l = StripeLayout::Create(4, o.code.k, o.code.m);
    s.parities.push_back({l->RowOfParity(member, p), std::vector<uint32_t>(k + o.code.m, 7)});
  }
  return s;
}

std::vector<SlotReport> All(const SnapshotOrigin& o, std::vector<int64_t> steps,
                            std::set<int> lost = {}) {
  std::vector<SlotReport> out;
  for (int r = 0; r < o.world; ++r) {
    if (lost.count(r)) continue;
    for (int64_t s : steps) out.push_back(Report(r, s, o));
  }
  return out;
}

TEST(RecoveryPlan, TheNewestStepFromLocalMemory) {
  const SnapshotOrigin o = Origin();
  Result<RecoveryChoice> c = ChooseRecovery(o, All(o, {11, 12}), 8);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->step, 12);
  EXPECT_EQ(c->rebuilt, 0);
  for (const ImageSource& img : c->images) {
    for (const PieceSource& p : img.pieces) {
      EXPECT_TRUE(p.local);
      EXPECT_EQ(p.holder, img.old_rank);
      EXPECT_EQ(p.slot, 0);
    }
  }
  EXPECT_EQ(c->Describe(), "step 12: 8 images from local memory");
}

TEST(RecoveryPlan, ALostNodeIsRebuiltFromItsRows) {
  const SnapshotOrigin o = Origin();
  Result<RecoveryChoice> c = ChooseRecovery(o, All(o, {11, 12}, {2, 3}), 6);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->step, 12);
  EXPECT_EQ(c->rebuilt, 2);
  EXPECT_EQ(c->Describe(), "step 12: 6 images from local memory, 2 rebuilt by erasure decoding");
  // Old rank 2 is member 1 of group {0, 2, 4, 6}: its pieces 0 and 1 are in rows 0 and 3
  // (stripe.h's worked example: row 0 = (m1.0, m2.1) + parity at m0; row 3 = (m0.0, m1.1) + m3).
  const ImageSource& img = c->images[2];
  EXPECT_TRUE(img.rebuilt);
  EXPECT_EQ(img.rebuilder, 2 % 6);
  ASSERT_EQ(img.pieces.size(), 2u);
  EXPECT_EQ(img.pieces[0].row, 0);
  EXPECT_EQ(img.pieces[1].row, 3);
  for (const PieceSource& p : img.pieces) {
    EXPECT_FALSE(p.local);
    ASSERT_EQ(p.fragments.size(), 2u);
    EXPECT_EQ(p.manifest.size(), 3u);
    for (const FragmentRef& f : p.fragments) {
      EXPECT_NE(f.old_rank, 2);
      EXPECT_NE(f.old_rank, 3);
    }
  }
  // Row 0's fragments: data piece 1 of member 2 (old rank 4) is... member 2 holds piece 1 of row
  // 0; the lost member 1 held piece 0; parity 0 is at member 0 (old rank 0).
  const PieceSource& row0 = img.pieces[0];
  EXPECT_EQ(row0.fragments[0].index, 1);
  EXPECT_EQ(row0.fragments[0].old_rank, 4);
  EXPECT_EQ(row0.fragments[1].index, 2);
  EXPECT_TRUE(row0.fragments[1].parity);
  EXPECT_EQ(row0.fragments[1].old_rank, 0);
}

TEST(RecoveryPlan, ASaveNotSealedEverywhereIsPassedOver) {
  const SnapshotOrigin o = Origin();
  std::vector<SlotReport> reports = All(o, {12, 13});
  for (SlotReport& r : reports) {
    if (r.old_rank == 5 && r.step == 13) r.state = SlotState::kWriting;  // killed while copying
    if (r.step == 13) r.parity_ok.assign(1, false);  // replication never finished
  }
  Result<RecoveryChoice> c = ChooseRecovery(o, reports, 8);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->step, 12);
  EXPECT_EQ(c->rebuilt, 0);
}

TEST(RecoveryPlan, ADamagedPieceIsRebuiltAlone) {
  const SnapshotOrigin o = Origin();
  std::vector<SlotReport> reports = All(o, {12});
  reports[4].piece_ok[0] = false;  // old rank 4
  Result<RecoveryChoice> c = ChooseRecovery(o, reports, 8);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const ImageSource& img = c->images[4];
  EXPECT_TRUE(img.rebuilt);
  EXPECT_FALSE(img.pieces[0].local);
  EXPECT_TRUE(img.pieces[1].local);
  EXPECT_EQ(img.pieces[1].holder, 4);
}

TEST(RecoveryPlan, MoreThanMLostInAGroupIsRefusedWithTheReason) {
  const SnapshotOrigin o = Origin();
  Result<RecoveryChoice> c = ChooseRecovery(o, All(o, {12}, {2, 3, 4, 5}), 4);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("old rank 2 (node n1): its snapshot memory is gone"),
            std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("intact fragments a rebuild needs (RS(2,1) survives 1"),
            std::string::npos)
      << c.status().message();
  EXPECT_FALSE(ChooseRecovery(o, {}, 4).ok());
}

TEST(RecoveryPlan, LocalOnlySnapshots) {
  const SnapshotOrigin o = Origin({1, 0});
  Result<RecoveryChoice> c = ChooseRecovery(o, All(o, {3, 4}), 8);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->step, 4);
  Result<RecoveryChoice> lost = ChooseRecovery(o, All(o, {3, 4}, {7}), 8);
  ASSERT_FALSE(lost.ok());
  EXPECT_NE(lost.status().message().find("not erasure-coded"), std::string::npos);
}

}  // namespace
}  // namespace loom
