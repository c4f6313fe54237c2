// Block attention with online softmax: against naive causal attention (forward, lse), against
// finite differences (backward), with partial last blocks, and with key blocks visited in a
// rotated order as ring attention will do.
#include "core/kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/threads.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::Dot;
using testing::RandomVector;

// Naive causal attention in double. qkv [B,T,3C] -> out [B,T,C], lse [B,H,T].
void NaiveAttention(const std::vector<double>& qkv, int64_t b, int64_t t, int64_t h, int64_t hd,
                    std::vector<double>& out, std::vector<double>& lse) {
  const int64_t c = h * hd;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t i = 0; i < t; ++i) {
        std::vector<double> s(i + 1);
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double d = 0;
          for (int64_t k = 0; k < hd; ++k)
            d += qkv[(bi * t + i) * 3 * c + hi * hd + k] *
                 qkv[(bi * t + j) * 3 * c + c + hi * hd + k];
          s[j] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int64_t k = 0; k < hd; ++k) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j)
            o += s[j] / sum * qkv[(bi * t + j) * 3 * c + 2 * c + hi * hd + k];
          out[(bi * t + i) * c + hi * hd + k] = o;
        }
        lse[(bi * h + hi) * t + i] = mx + std::log(sum);
      }
}

struct Case {
  int64_t b, t, h, hd, block_q, block_k;
};

class AttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionTest, ForwardMatchesNaive) {
  ConfigureThreads(2);
  const Case k = GetParam();
  const int64_t c = k.h * k.hd;
  auto qkv = RandomVector<double>(k.b * k.t * 3 * c, 1);
  std::vector<double> out(k.b * k.t * c), lse(k.b * k.h * k.t), ref_out(out.size()),
      ref_lse(lse.size());
  NaiveAttention(qkv, k.b, k.t, k.h, k.hd, ref_out, ref_lse);
  AttentionShape s{k.b, k.t, k.h, k.hd, k.block_q, k.block_k};
  AttentionForward(out.data(), lse.data(), qkv.data(), s);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref_out[i], 1e-12) << i;
  for (size_t i = 0; i < lse.size(); ++i) ASSERT_NEAR(lse[i], ref_lse[i], 1e-12) << i;
  std::vector<float> qkvf(qkv.begin(), qkv.end()), outf(out.size()), lsef(lse.size());
  AttentionForward(outf.data(), lsef.data(), qkvf.data(), s);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(outf[i], ref_out[i], 1e-5) << i;
}

TEST_P(AttentionTest, BackwardMatchesFiniteDifferences) {
  ConfigureThreads(2);
  const Case k = GetParam();
  const int64_t c = k.h * k.hd;
  auto qkv = RandomVector<double>(k.b * k.t * 3 * c, 2);
  auto r = RandomVector<double>(k.b * k.t * c, 3);
  std::vector<double> out(k.b * k.t * c), lse(k.b * k.h * k.t), dqkv(qkv.size());
  AttentionShape s{k.b, k.t, k.h, k.hd, k.block_q, k.block_k};
  auto loss = [&] {
    AttentionForward(out.data(), lse.data(), qkv.data(), s);
    return Dot(out, r);
  };
  loss();
  AttentionBackward(dqkv.data(), r.data(), qkv.data(), out.data(), lse.data(), s);
  testing::ExpectGradientMatches(qkv, dqkv, loss, "dqkv", 1e-6, 400);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Values(Case{2, 16, 2, 4, 4, 4},    // seq a multiple of blocks
                      Case{1, 37, 3, 5, 8, 8},    // partial last block
                      Case{1, 37, 2, 4, 4, 16},   // key blocks span query blocks
                      Case{2, 41, 2, 3, 16, 5},   // key blocks inside query blocks
                      Case{2, 20, 1, 8, 64, 64},  // one block bigger than seq
                      Case{1, 9, 2, 3, 1, 1}));   // single-row blocks

// Ring order: each query block folds key blocks starting from its own and wrapping around,
// the way ring attention receives them; fully masked blocks are skipped by the routine itself.
TEST(AttentionBlocks, RotatedKeyOrderEqualsFullAttention) {
  const int64_t t = 30, hd = 6, blk = 7, chunks = (t + blk - 1) / blk;
  auto q = RandomVector<double>(t * hd, 4), kk = RandomVector<double>(t * hd, 5),
       v = RandomVector<double>(t * hd, 6);
  std::vector<double> qkv(t * 3 * hd);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t d = 0; d < hd; ++d) {
      qkv[i * 3 * hd + d] = q[i * hd + d];
      qkv[i * 3 * hd + hd + d] = kk[i * hd + d];
      qkv[i * 3 * hd + 2 * hd + d] = v[i * hd + d];
    }
  std::vector<double> ref(t * hd), ref_lse(t);
  NaiveAttention(qkv, 1, t, 1, hd, ref, ref_lse);
  const double scale = 1 / std::sqrt(double(hd));
  for (int64_t qb = 0; qb < chunks; ++qb) {
    const int64_t q0 = qb * blk, tq = std::min(blk, t - q0);
    std::vector<double> m(tq), l(tq), acc(tq * hd), scratch(blk * blk), out(tq * hd), lse(tq);
    AttentionStateInit(m.data(), l.data(), acc.data(), tq, hd, hd);
    for (int64_t step = 0; step < chunks; ++step) {
      const int64_t kb = (qb + step) % chunks, k0 = kb * blk, tk = std::min(blk, t - k0);
      AttentionBlockForward<double>({q.data() + q0 * hd, hd, tq, q0},
                                    {kk.data() + k0 * hd, hd, tk, k0},
                                    {v.data() + k0 * hd, hd, tk, k0}, hd, scale, true, m.data(),
                                    l.data(), acc.data(), hd, scratch.data());
    }
    AttentionStateFinalize(out.data(), hd, lse.data(), m.data(), l.data(), acc.data(), tq, hd, hd);
    for (int64_t i = 0; i < tq; ++i) {
      EXPECT_NEAR(lse[i], ref_lse[q0 + i], 1e-12);
      for (int64_t d = 0; d < hd; ++d) ASSERT_NEAR(out[i * hd + d], ref[(q0 + i) * hd + d], 1e-12);
    }
  }
}

TEST(AttentionBlocks, FullyMaskedBlockIsSkipped) {
  EXPECT_TRUE(BlockFullyMasked(/*q_pos0=*/0, /*q_rows=*/8, /*k_pos0=*/8));
  EXPECT_FALSE(BlockFullyMasked(0, 8, 7));
  std::vector<double> q(4, 1.0), k(4, 1.0), v(4, 5.0), m(2), l(2), acc(4), scratch(4);
  AttentionStateInit(m.data(), l.data(), acc.data(), 2, 2, 2);
  AttentionBlockForward<double>({q.data(), 2, 2, 0}, {k.data(), 2, 2, 10}, {v.data(), 2, 2, 10}, 2,
                                1.0, true, m.data(), l.data(), acc.data(), 2, scratch.data());
  EXPECT_EQ(l[0], 0.0);
  EXPECT_EQ(acc[0], 0.0);
  EXPECT_EQ(m[0], -std::numeric_limits<double>::infinity());
}

}  // namespace
}  // namespace loom
