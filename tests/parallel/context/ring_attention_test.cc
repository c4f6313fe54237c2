// Ring attention simulated in-process: cp ranks, each folding every rank's K/V (in ring order)
// into its load-balanced query chunks, equal full causal attention in the forward (output and
// log-sum-exp) and in every input gradient, including chunks whose last block is partial; with
// grouped-query attention only the KV heads travel, against attention over repeated K/V heads.
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
  int64_t heads = 2, kv_heads = 2;  // fewer KV heads: grouped-query attention
};

template <typename T>
void Check(const Case& k, double tol) {
  const int64_t b = 2, h = k.heads, kvh = k.kv_heads, group = h / kvh, hd = 4, t = k.seq;
  const int64_t c = h * hd, kc = kvh * hd, w = c + 2 * kc;
  const ContextSplit split{t, k.cp};
  const int64_t rows = split.local_rows();
  // The ring's input: q | k | v with kv_heads K/V heads; the reference's: each query head's K/V
  // copied from its KV head (what repeat_kv does), through full causal attention.
  auto qkv_d = testing::RandomVector<double>(b * t * w, 11);
  auto dout_d = testing::RandomVector<double>(b * t * c, 12);
  std::vector<T> qkvc(qkv_d.begin(), qkv_d.end()), dout(dout_d.begin(), dout_d.end());
  std::vector<T> qkv(b * t * 3 * c);
  for (int64_t i = 0; i < b * t; ++i) {
    const T* src = qkvc.data() + i * w;
    T* dst = qkv.data() + i * 3 * c;
    std::copy(src, src + c, dst);
    for (int64_t j = 0; j < h; ++j) {
      std::copy(src + c + j / group * hd, src + c + (j / group + 1) * hd, dst + c + j * hd);
      std::copy(src + c + kc + j / group * hd, src + c + kc + (j / group + 1) * hd,
                dst + 2 * c + j * hd);
    }
  }
  std::vector<T> out(b * t * c), lse(b * h * t), dqkv(qkv.size());
  AttentionShape as{b, t, h, hd, 8, 8};
  AttentionForward(out.data(), lse.data(), qkv.data(), as);
  AttentionBackward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), as);
  // The reference gradient of q | k | v: each KV head's is the sum of its query heads' copies.
  std::vector<T> dqkvc(qkvc.size(), T(0));
  for (int64_t i = 0; i < b * t; ++i) {
    const T* src = dqkv.data() + i * 3 * c;
    T* dst = dqkvc.data() + i * w;
    std::copy(src, src + c, dst);
    for (int64_t j = 0; j < h; ++j)
      for (int64_t d = 0; d < hd; ++d) {
        dst[c + j / group * hd + d] += src[c + j * hd + d];
        dst[c + kc + j / group * hd + d] += src[2 * c + j * hd + d];
      }
  }

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
    lqkv.push_back(local(qkvc, r, w));
    ldout.push_back(local(dout, r, c));
    kv.emplace_back(b * rows * 2 * kc);
    PackKeyValue(lqkv[r].data(), kv[r].data(), b, rows, c, kc);
    dkv[r].assign(b * rows * 2 * kc, T(0));
  }
  for (int r = 0; r < k.cp; ++r) {
    RingAttention<T> ring(split, r, b, h, hd, k.block_q, k.block_k, kvh);
    ring.ForwardBegin();
    for (int s = 0; s < k.cp; ++s) {  // ring order: own K/V first, then the previous ranks'
      const int src = (r - s + k.cp) % k.cp;
      ring.ForwardStep(lqkv[r].data(), kv[src].data(), src);
    }
    lout[r].resize(b * rows * c);
    llse[r].resize(b * h * rows);
    ring.ForwardEnd(lout[r].data(), llse[r].data());
    ldqkv[r].assign(b * rows * w, T(0));
    ring.BackwardBegin(ldout[r].data(), lout[r].data(), ldqkv[r].data());
    for (int s = 0; s < k.cp; ++s) {
      const int src = (r - s + k.cp) % k.cp;
      ring.BackwardStep(lqkv[r].data(), kv[src].data(), src, ldout[r].data(), llse[r].data(),
                        ldqkv[r].data(), dkv[src].data());
    }
  }
  for (int r = 0; r < k.cp; ++r) {
    auto ref_out = local(out, r, c), ref_dqkv = local(dqkvc, r, w);
    for (size_t i = 0; i < ref_out.size(); ++i)
      ASSERT_NEAR(lout[r][i], ref_out[i], tol) << "out " << i;
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t i = 0; i < rows; ++i)
          ASSERT_NEAR(llse[r][(bi * h + hh) * rows + i],
                      lse[(bi * h + hh) * t + split.Position(r, i)], tol);
    for (int64_t i = 0; i < b * rows; ++i) {
      for (int64_t j = 0; j < c; ++j)
        ASSERT_NEAR(ldqkv[r][i * w + j], ref_dqkv[i * w + j], tol) << "dq";
      for (int64_t j = 0; j < 2 * kc; ++j)
        ASSERT_NEAR(dkv[r][i * 2 * kc + j], ref_dqkv[i * w + c + j], tol) << "dk|dv";
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
                                           Case{4, 56, 2, 5},    // chunk 7, odd blocks
                                           // Grouped-query: 2 query heads per KV head, then 4.
                                           Case{2, 40, 4, 4, 4, 2}, Case{4, 56, 2, 5, 4, 1}));

TEST(ContextSplit, LoadBalancedPositions) {
  ContextSplit s{16, 2};  // 4 chunks of 4
  EXPECT_EQ(s.Position(0, 0), 0);
  EXPECT_EQ(s.Position(0, 4), 12);  // rank 0 holds chunks 0 and 3
  EXPECT_EQ(s.Position(1, 0), 4);
  EXPECT_EQ(s.Position(1, 7), 11);  // rank 1 holds chunks 1 and 2
}

}  // namespace
}  // namespace loom
