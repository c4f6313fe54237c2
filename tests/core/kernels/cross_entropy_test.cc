// Chunked (and vocab-sharded) cross-entropy against a naive softmax; backward against finite
// differences; chunk sizes that do not divide the vocabulary; padded vocabulary rows ignored.
#include "core/kernels/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/threads.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::RandomVector;

// Mean loss over n tokens with logits x . wte^T over the first `valid` rows.
double NaiveLoss(const std::vector<double>& x, const std::vector<double>& wte,
                 const std::vector<int32_t>& tgt, int64_t n, int64_t c, int64_t valid) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> z(valid);
    double mx = -1e300;
    for (int64_t v = 0; v < valid; ++v) {
      double d = 0;
      for (int64_t j = 0; j < c; ++j) d += x[i * c + j] * wte[v * c + j];
      z[v] = d;
      mx = std::max(mx, d);
    }
    double s = 0;
    for (double d : z) s += std::exp(d - mx);
    total += mx + std::log(s) - z[tgt[i]];
  }
  return total / static_cast<double>(n);
}

double LoomLoss(const std::vector<double>& x, const std::vector<double>& wte,
                const std::vector<int32_t>& tgt, const VocabShard& s) {
  std::vector<double> mx(s.n), sum(s.n), zt(s.n), lse(s.n), loss(s.n), buf(s.n * s.chunk);
  CrossEntropyStats(mx.data(), sum.data(), zt.data(), x.data(), wte.data(), tgt.data(), s,
                    buf.data());
  CrossEntropyFinish(lse.data(), loss.data(), mx.data(), sum.data(), zt.data(), s.n);
  double total = 0;
  for (double l : loss) total += l;
  return total / static_cast<double>(s.n);
}

TEST(CrossEntropy, ChunkedMatchesNaive) {
  ConfigureThreads(2);
  const int64_t n = 21, c = 12, v = 50;
  auto x = RandomVector<double>(n * c, 1), wte = RandomVector<double>(v * c, 2);
  auto tgt = testing::RandomTokens(n, v, 3);
  const double ref = NaiveLoss(x, wte, tgt, n, c, v);
  for (int64_t chunk : {1, 7, 16, 50, 64}) {  // 7 and 16 do not divide 50
    EXPECT_NEAR(LoomLoss(x, wte, tgt, {n, c, 0, v, v, chunk}), ref, 1e-12) << "chunk " << chunk;
  }
}

TEST(CrossEntropy, PaddedRowsAreIgnored) {
  ConfigureThreads(2);
  const int64_t n = 8, c = 5, v = 13, padded = 16;
  auto x = RandomVector<double>(n * c, 4), wte = RandomVector<double>(padded * c, 5);
  auto tgt = testing::RandomTokens(n, v, 6);
  EXPECT_NEAR(LoomLoss(x, wte, tgt, {n, c, 0, padded, v, 4}), NaiveLoss(x, wte, tgt, n, c, v),
              1e-12);
}

TEST(CrossEntropy, ShardStatisticsCombineToFullLoss) {
  ConfigureThreads(2);
  const int64_t n = 10, c = 6, v = 30, shards = 3, rows = v / shards;
  auto x = RandomVector<double>(n * c, 7), wte = RandomVector<double>(v * c, 8);
  auto tgt = testing::RandomTokens(n, v, 9);
  std::vector<double> gmax(n, -INFINITY), gsum(n, 0), gzt(n, 0);
  std::vector<std::vector<double>> mx(shards, std::vector<double>(n)), sum = mx, zt = mx;
  std::vector<double> buf(n * 4);
  for (int64_t s = 0; s < shards; ++s) {
    VocabShard vs{n, c, s * rows, rows, v, 4};
    CrossEntropyStats(mx[s].data(), sum[s].data(), zt[s].data(), x.data(),
                      wte.data() + s * rows * c, tgt.data(), vs, buf.data());
    for (int64_t i = 0; i < n; ++i) gmax[i] = std::max(gmax[i], mx[s][i]);
  }
  for (int64_t s = 0; s < shards; ++s)
    for (int64_t i = 0; i < n; ++i) {
      gsum[i] += sum[s][i] * std::exp(mx[s][i] - gmax[i]);  // the all-reduce the caller does
      gzt[i] += zt[s][i];
    }
  std::vector<double> lse(n), loss(n);
  CrossEntropyFinish(lse.data(), loss.data(), gmax.data(), gsum.data(), gzt.data(), n);
  double total = 0;
  for (double l : loss) total += l / n;
  EXPECT_NEAR(total, NaiveLoss(x, wte, tgt, n, c, v), 1e-12);
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferences) {
  ConfigureThreads(2);
  const int64_t n = 7, c = 6, v = 23;
  auto x = RandomVector<double>(n * c, 10), wte = RandomVector<double>(v * c, 11);
  auto tgt = testing::RandomTokens(n, v, 12);
  VocabShard s{n, c, 0, v, v, 5};
  std::vector<double> mx(n), sum(n), zt(n), lse(n), buf(n * s.chunk);
  CrossEntropyStats(mx.data(), sum.data(), zt.data(), x.data(), wte.data(), tgt.data(), s,
                    buf.data());
  CrossEntropyFinish<double>(lse.data(), nullptr, mx.data(), sum.data(), zt.data(), n);
  std::vector<double> dloss(n, 1.0 / n), dx(n * c, 0.0), dwte(v * c, 0.0);
  CrossEntropyBackward(dx.data(), dwte.data(), x.data(), wte.data(), tgt.data(), lse.data(),
                       dloss.data(), s, buf.data());
  auto loss = [&] { return LoomLoss(x, wte, tgt, s); };
  testing::ExpectGradientMatches(x, dx, loss, "dx");
  testing::ExpectGradientMatches(wte, dwte, loss, "dwte");
}

}  // namespace
}  // namespace loom
