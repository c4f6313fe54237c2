// The message tag allocation: users of one communicator never share a tag, every tag a layout
// within the checked limits produces lies in its user's range, and layouts beyond them are refused.
#include "parallel/message_tags.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>

namespace loom {
namespace {

TEST(MessageTags, RangesOfOneGroupAreDisjoint) {
  EXPECT_TRUE(TagRangesAreDisjoint());
  const TagRange a{TagGroup::kPipeline, 0, 10, "a"}, b{TagGroup::kPipeline, 9, 5, "b"},
      c{TagGroup::kContext, 0, 10, "c"};
  EXPECT_TRUE(a.Overlaps(b));
  EXPECT_FALSE(a.Overlaps(c));  // another communicator
}

// Every tag the pipeline uses for micro x chunks, each within its range, none twice.
TEST(MessageTags, PipelineTagsStayInTheirRanges) {
  for (auto [micro, chunks] : {std::pair{1, 2}, {8, 4}, {64, 16}, {1250, 8}, {10000, 1}}) {
    ASSERT_TRUE(CheckPipelineTags(micro, chunks).ok()) << micro << " x " << chunks;
    std::set<int> seen;
    for (int m = 0; m < micro; ++m) {
      for (int g = 0; g < chunks; ++g) {
        for (bool grad : {false, true}) {
          const int tag = PipelineTransferTag(grad, m, g, chunks);
          ASSERT_GE(tag, kPipelineTransferTags.first);
          ASSERT_LT(tag, kPipelineTransferTags.end());
          ASSERT_TRUE(seen.insert(tag).second) << "tag " << tag << " used twice";
        }
      }
    }
    for (int g = 0; g < chunks; ++g) {
      EXPECT_GE(PipelineEvalTag(g), kPipelineEvalTags.first);
      EXPECT_LT(PipelineEvalTag(g), kPipelineEvalTags.end());
    }
  }
  for (int tag : {kTiedWteTag, kTiedWteGradTag}) {
    EXPECT_GE(tag, kTiedEmbeddingTags.first);
    EXPECT_LT(tag, kTiedEmbeddingTags.end());
  }
  EXPECT_NE(kTiedWteTag, kTiedWteGradTag);
}

TEST(MessageTags, RingTagsStayInTheirRanges) {
  const int cp = kRingForwardTags.count;
  ASSERT_TRUE(CheckRingTags(cp).ok());
  std::set<int> seen;
  for (int s = 0; s < cp; ++s) {
    for (int tag : {RingForwardTag(s), RingBackwardKvTag(s), RingBackwardGradTag(s)}) {
      ASSERT_TRUE(seen.insert(tag).second) << "tag " << tag << " used twice";
    }
    EXPECT_LT(RingForwardTag(s), kRingForwardTags.end());
    EXPECT_LT(RingBackwardKvTag(s), kRingBackwardKvTags.end());
    EXPECT_LT(RingBackwardGradTag(s), kRingBackwardGradTags.end());
  }
}

TEST(MessageTags, LayoutsBeyondTheRangesAreRefused) {
  EXPECT_FALSE(CheckPipelineTags(10001, 1).ok());
  EXPECT_FALSE(CheckPipelineTags(1251, 8).ok());
  const Status st = CheckRingTags(kRingForwardTags.count + 1);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("at most 100 ranks"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace loom
