// Ring attention simulated in-process: cp ranks, each folding every rank's K/V (in ring order)
// into its load-balanced query chunks, equal full causal attention in the forward (output and
// log-sum-exp) and in every input gradient, including chunks whose last block is partial.
#include "parallel/context/ring_attention.h"

#include <gtest/gtest.h>

#include "core/kernels/attention.h"
#include "core/threads.h"
#include "tests/test_util.h"

namespace loom {
namespace {

struct Case {
  int cp;
  int64_t seq, block_q, block_k;
};

template <typename T>
void Check(const Case& k, double tol) {
  const int64_t b = 2, h = 2, hd = 4, c = h * hd, t = k.seq;
  const ContextSplit split{t, k.cp};
  const int64_t rows = split.local_rows();
  auto qkv_d = testing::RandomVector<double>(b * t * 3 * c, 11);
  auto dout_d = testing::RandomVector<double>(b * t * c, 12);
  std::vector<T> qkv(qkv_d.begin(), qkv_d.end()), dout(dout_d.begin(), dout_d.end());
  // Reference: full causal attention over the whole sequence.
  std::vector<T> out(b * t * c), lse(b * h * t), dqkv(qkv.size());
  AttentionShape as{b, t, h, hd, 8, 8};
  AttentionForward(out.data(), lse.data(), qkv.data(), as);
  AttentionBackward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), as);

  // Each rank's local rows, gathered from the full tensors by position.
  auto local = [&](const std::vector<T>& full, int rank, int64_t width) {
    std::vector<T> v(b * rows * width);
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t i = 0; i < rows; ++i) {
        const T* src = full.data() + (bi * t + split.Position(rank, i)) * width;
        std::copy(src, src + width, v.data() + (bi * rows + i) * width);
      }
    return v;
  };
  std::vector<std::vector<T>> lqkv, kv, ldout, lout(k.cp), llse(k.cp), ldqkv(k.cp), dkv(k.cp);
  for (int r = 0; r < k.cp; ++r) {
    lqkv.push_back(local(qkv, r, 3 * c));
    ldout.push_back(local(dout, r, c));
    kv.emplace_back(b * rows * 2 * c);
    PackKeyValue(lqkv[r].data(), kv[r].data(), b, rows, c);
    dkv[r].assign(b * rows * 2 * c, T(0));
  }
  for (int r = 0; r < k.cp; ++r) {
    RingAttention<T> ring(split, r, b, h, hd, k.block_q, k.block_k);
    ring.ForwardBegin();
    for (int s = 0; s < k.cp; ++s) {  // ring order: own K/V first, then the previous ranks'
      const int src = (r - s + k.cp) % k.cp;
      ring.ForwardStep(lqkv[r].data(), kv[src].data(), src);
    }
    lout[r].resize(b * rows * c);
    llse[r].resize(b * h * rows);
    ring.ForwardEnd(lout[r].data(), llse[r].data());
    ldqkv[r].assign(b * rows * 3 * c, T(0));
    ring.BackwardBegin(ldout[r].data(), lout[r].data(), ldqkv[r].data());
    for (int s = 0; s < k.cp; ++s) {
      const int src = (r - s + k.cp) % k.cp;
      ring.BackwardStep(lqkv[r].data(), kv[src].data(), src, ldout[r].data(), llse[r].data(),
                        ldqkv[r].data(), dkv[src].data());
    }
  }
  for (int r = 0; r < k.cp; ++r) {
    auto ref_out = local(out, r, c), ref_dqkv = local(dqkv, r, 3 * c);
    for (size_t i = 0; i < ref_out.size(); ++i)
      ASSERT_NEAR(lout[r][i], ref_out[i], tol) << "out " << i;
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t i = 0; i < rows; ++i)
          ASSERT_NEAR(llse[r][(bi * h + hh) * rows + i],
                      lse[(bi * h + hh) * t + split.Position(r, i)], tol);
    for (int64_t i = 0; i < b * rows; ++i) {
      for (int64_t j = 0; j < c; ++j) {
        ASSERT_NEAR(ldqkv[r][i * 3 * c + j], ref_dqkv[i * 3 * c + j], tol) << "dq";
        ASSERT_NEAR(dkv[r][i * 2 * c + j], ref_dqkv[i * 3 * c + c + j], tol) << "dk";
        ASSERT_NEAR(dkv[r][i * 2 * c + c + j], ref_dqkv[i * 3 * c + 2 * c + j], tol) << "dv";
      }
    }
  }
}

class RingAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(RingAttentionTest, EqualsFullCausalAttentionDouble) {
  ConfigureThreads(2);
  Check<double>(GetParam(), 1e-12);
}

TEST_P(RingAttentionTest, EqualsFullCausalAttentionFloat) {
  ConfigureThreads(2);
  Check<float>(GetParam(), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Splits, RingAttentionTest,
                         ::testing::Values(Case{2, 40, 4, 4},    // chunk 10: partial last blocks
                                           Case{4, 40, 3, 4},    // chunk 5
                                           Case{2, 64, 16, 16},  // whole-chunk blocks
                                           Case{4, 56, 2, 5}));  // chunk 7, odd blocks

TEST(ContextSplit, LoadBalancedPositions) {
  ContextSplit s{16, 2};  // 4 chunks of 4
  EXPECT_EQ(s.Position(0, 0), 0);
  EXPECT_EQ(s.Position(0, 4), 12);  // rank 0 holds chunks 0 and 3
  EXPECT_EQ(s.Position(1, 0), 4);
  EXPECT_EQ(s.Position(1, 7), 11);  // rank 1 holds chunks 1 and 2
}

}  // namespace
}  // namespace loom
