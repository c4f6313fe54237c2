// The samples of a global step depend on (seed, step) only: any slicing into ranks or
// micro-batches reproduces the same global batch; another global batch after a resume continues
// the stream.
#include "worker/data/sampler.h"

#include <gtest/gtest.h>

#include <numeric>

namespace loom {
namespace {

TEST(WindowSampler, SlicesReassembleTheGlobalBatch) {
  std::vector<int32_t> tokens(1000);
  std::iota(tokens.begin(), tokens.end(), 0);
  const int64_t seq = 16, gb = 8;
  WindowSampler sampler(&tokens, seq, gb, 42, kTrainStream);
  std::vector<int32_t> all_in(gb * seq), all_tgt(gb * seq);
  sampler.Fill(5, 0, gb, all_in.data(), all_tgt.data());
  for (int64_t parts : {2, 4, 8}) {
    for (int64_t p = 0; p < parts; ++p) {
      const int64_t count = gb / parts;
      std::vector<int32_t> in(count * seq), tgt(count * seq);
      sampler.Fill(5, p * count, count, in.data(), tgt.data());
      for (int64_t i = 0; i < count * seq; ++i) {
        ASSERT_EQ(in[i], all_in[p * count * seq + i]);
        ASSERT_EQ(tgt[i], all_tgt[p * count * seq + i]);
      }
    }
  }
  for (int64_t i = 0; i < gb * seq; ++i) EXPECT_EQ(all_tgt[i], all_in[i] + 1);  // next token
}

TEST(WindowSampler, DependsOnSeedAndStepOnly) {
  std::vector<int32_t> tokens(5000, 0);
  WindowSampler a(&tokens, 32, 4, 7, kTrainStream), b(&tokens, 32, 4, 7, kTrainStream),
      c(&tokens, 32, 4, 8, kTrainStream), e(&tokens, 32, 4, 7, kEvalStream);
  int same_seed_diff = 0, other_seed_diff = 0, other_stream_diff = 0;
  for (int64_t s = 0; s < 20; ++s)
    for (int64_t j = 0; j < 4; ++j) {
      same_seed_diff += a.Offset(s, j) != b.Offset(s, j);
      other_seed_diff += a.Offset(s, j) != c.Offset(s, j);
      other_stream_diff += a.Offset(s, j) != e.Offset(s, j);
      ASSERT_LE(a.Offset(s, j) + 32, 4999);  // the window and its targets fit
    }
  EXPECT_EQ(same_seed_diff, 0);
  EXPECT_GT(other_seed_diff, 70);
  EXPECT_GT(other_stream_diff, 70);
}

// A run resumed with another global batch continues the stream where the checkpoint left it:
// 10 steps of 8 samples, then steps of 16 (or of 4) draw what the 8-sample run would have drawn
// from step 10 on, in order — no sample index twice, none skipped.
TEST(WindowSampler, AnotherGlobalBatchContinuesTheStream) {
  std::vector<int32_t> tokens(100000, 0);
  WindowSampler eight(&tokens, 32, 8, 7, kTrainStream);
  std::vector<int64_t> stream;  // what the 8-sample run draws at steps 10..29
  for (int64_t s = 10; s < 30; ++s)
    for (int64_t j = 0; j < 8; ++j) stream.push_back(eight.Offset(s, j));
  for (int64_t gb : {16, 4}) {
    WindowSampler other(&tokens, 32, gb, 7, kTrainStream);
    EXPECT_NE(other.Offset(10, 0), stream[0]);  // without an origin: index 10 * gb
    other.SetOrigin(10, eight.Consumed(10));
    EXPECT_EQ(other.Consumed(10), 80);
    std::vector<int64_t> got;
    for (int64_t s = 10; got.size() < stream.size(); ++s) {
      for (int64_t j = 0; j < gb; ++j) got.push_back(other.Offset(s, j));
    }
    EXPECT_EQ(got, stream) << "global batch " << gb;
    EXPECT_EQ(other.Consumed(10 + 160 / gb), 80 + 160);
  }
  // The default origin is the plain stream.
  WindowSampler again(&tokens, 32, 8, 7, kTrainStream);
  again.SetOrigin(0, 0);
  EXPECT_EQ(again.Offset(12, 3), eight.Offset(12, 3));
  EXPECT_EQ(again.Consumed(12), 96);
}

}  // namespace
}  // namespace loom
