// Cross-entropy on the GPU: the chunk kernels against a double reference (padding columns,
// targets inside and outside the chunk, leading dimension wider than the chunk, two chunks folded
// online), and the composed CrossEntropyStats / CrossEntropyBackward (cuBLASLt fp32 GEMMs) against
// the CPU functions on a vocabulary shard with padded rows and a chunk size that does not divide
// it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/cuda/cross_entropy.h"
#include "core/cuda/kernels.h"
#include "core/kernels/cross_entropy.h"
#include "tests/core/cuda_test_util.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::DeviceBuffer;
using testing::ExpectAllClose;

// Two chunks of logits [n, cols] (leading dimension ld): chunk 0 holds ids [100, 150), all valid;
// chunk 1 holds ids [150, 200) of which the last 9 are padding (valid_cols = 41). Targets fall in
// either chunk, in the padding, or outside both.
TEST(CudaCrossEntropy, ChunkKernelsMatchDoubleReference) {
  LOOM_REQUIRE_GPU();
  const int64_t n = 13, cols = 50, ld = 53, valid1 = 41;
  const int64_t col0[2] = {100, 150}, valid[2] = {cols, valid1};
  std::vector<float> logits[2] = {testing::RandomVector<float>(n * ld, 1, 3.0),
                                  testing::RandomVector<float>(n * ld, 2, 3.0)};
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = static_cast<int32_t>(95 + (i * 17) % 110);
  const auto dloss = testing::RandomVector<float>(n, 3);

  // Reference in double over the valid columns of both chunks.
  std::vector<double> ref_max(n, -INFINITY), ref_sum(n, 0), ref_tl(n, 0), ref_lse(n), ref_loss(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int ch = 0; ch < 2; ++ch) {
      for (int64_t j = 0; j < valid[ch]; ++j) {
        ref_max[i] = std::max<double>(ref_max[i], logits[ch][i * ld + j]);
      }
    }
    for (int ch = 0; ch < 2; ++ch) {
      for (int64_t j = 0; j < valid[ch]; ++j) {
        ref_sum[i] += std::exp(double(logits[ch][i * ld + j]) - ref_max[i]);
        if (targets[i] == col0[ch] + j) ref_tl[i] = logits[ch][i * ld + j];
      }
    }
    ref_lse[i] = ref_max[i] + std::log(ref_sum[i]);
    ref_loss[i] = ref_lse[i] - ref_tl[i];
  }

  LOOM_ASSERT_OK_AND_ASSIGN(auto d_max, DeviceBuffer<float>::Poisoned(n));
  LOOM_ASSERT_OK_AND_ASSIGN(auto d_sum, DeviceBuffer<float>::Poisoned(n));
  LOOM_ASSERT_OK_AND_ASSIGN(auto d_tl, DeviceBuffer<float>::Poisoned(n));
  LOOM_ASSERT_OK_AND_ASSIGN(auto d_lse, DeviceBuffer<float>::Poisoned(n));
  LOOM_ASSERT_OK_AND_ASSIGN(auto d_loss, DeviceBuffer<float>::Poisoned(n));
  LOOM_ASSERT_OK_AND_ASSIGN(auto d_tgt, DeviceBuffer<int32_t>::From(targets));
  LOOM_ASSERT_OK_AND_ASSIGN(auto d_dloss, DeviceBuffer<float>::From(dloss));
  LOOM_ASSERT_OK_AND_ASSIGN(auto d_l0, DeviceBuffer<float>::From(logits[0]));
  LOOM_ASSERT_OK_AND_ASSIGN(auto d_l1, DeviceBuffer<float>::From(logits[1]));
  float* d_logits[2] = {d_l0.get(), d_l1.get()};
  LOOM_ASSERT_OK(cuda::CrossEntropyStatsInit(d_max.get(), d_sum.get(), d_tl.get(), n));
  for (int ch = 0; ch < 2; ++ch) {
    LOOM_ASSERT_OK(cuda::CrossEntropyChunkStats(d_max.get(), d_sum.get(), d_tl.get(), d_logits[ch],
                                                ld, n, valid[ch], col0[ch], d_tgt.get()));
  }
  LOOM_ASSERT_OK(
      cuda::CrossEntropyFinish(d_lse.get(), d_loss.get(), d_max.get(), d_sum.get(), d_tl.get(), n));
  LOOM_ASSERT_OK_AND_ASSIGN(auto g_max, d_max.Download());
  LOOM_ASSERT_OK_AND_ASSIGN(auto g_sum, d_sum.Download());
  LOOM_ASSERT_OK_AND_ASSIGN(auto g_tl, d_tl.Download());
  LOOM_ASSERT_OK_AND_ASSIGN(auto g_lse, d_lse.Download());
  LOOM_ASSERT_OK_AND_ASSIGN(auto g_loss, d_loss.Download());
  ExpectAllClose(g_max, ref_max, 0.0, 0.0, "max (a maximum is exact)");
  ExpectAllClose(g_tl, ref_tl, 0.0, 0.0, "target logit (a copy)");
  ExpectAllClose(g_sum, ref_sum, 1e-5, 0.0, "sumexp");
  ExpectAllClose(g_lse, ref_lse, 1e-5, 1e-6, "lse");
  ExpectAllClose(g_loss, ref_loss, 1e-5, 1e-5, "loss");

  // dlogits of chunk 1 in place: padding columns become 0, the gap [cols, ld) stays untouched.
  LOOM_ASSERT_OK(cuda::CrossEntropyChunkGrad(d_l1.get(), ld, n, cols, valid1, col0[1], d_tgt.get(),
                                             d_lse.get(), d_dloss.get()));
  LOOM_ASSERT_OK_AND_ASSIGN(auto g_grad, d_l1.Download());
  std::vector<double> ref_grad(n * ld);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < ld; ++j) {
      const double z = logits[1][i * ld + j];
      double d = z;  // the gap keeps its value
      if (j < cols) d = 0;
      if (j < valid1) {
        d = dloss[i] * (std::exp(z - ref_lse[i]) - (targets[i] == col0[1] + j ? 1.0 : 0.0));
      }
      ref_grad[i * ld + j] = d;
    }
  }
  ExpectAllClose(g_grad, ref_grad, 1e-5, 1e-6, "dlogits");
  // A chunk with nothing valid folds in nothing.
  LOOM_ASSERT_OK(cuda::CrossEntropyChunkStats(d_max.get(), d_sum.get(), d_tl.get(), d_l0.get(), ld,
                                              n, 0, 0, d_tgt.get()));
  LOOM_ASSERT_OK_AND_ASSIGN(auto g_sum2, d_sum.Download());
  EXPECT_EQ(g_sum2, g_sum);
}

struct ShardCase {
  int64_t vocab_begin, rows, vocab_valid, chunk;
};

// End to end against core/kernels/cross_entropy.h (fp32 CPU): logits from GEMMs on both sides
// (different summation orders), so 1e-5 relative on the statistics and 1e-4 relative / 1e-5
// absolute on the accumulated gradients (sums over chunks of products of those logits).
TEST(CudaCrossEntropy, ComposedMatchesCpu) {
  LOOM_REQUIRE_GPU();
  LOOM_ASSERT_OK_AND_ASSIGN(auto handle, cuda::GemmHandle::Create());
  const int64_t n = 19, c = 48;
  for (const ShardCase sc : {ShardCase{64, 100, 150, 32},    // 86 valid rows: 32 + 32 + 22; padding
                             ShardCase{0, 70, 70, 4096},     // one chunk, no padding
                             ShardCase{0, 70, 70, 1},        // a chunk per row
                             ShardCase{150, 10, 150, 8}}) {  // only padding: nothing to do
    VocabShard s;
    s.n = n;
    s.channels = c;
    s.vocab_begin = sc.vocab_begin;
    s.rows = sc.rows;
    s.vocab_valid = sc.vocab_valid;
    s.chunk = sc.chunk;
    const std::string what = "shard [" + std::to_string(sc.vocab_begin) + ", +" +
                             std::to_string(sc.rows) + ") valid < " +
                             std::to_string(sc.vocab_valid) + " chunk " + std::to_string(sc.chunk);
    const auto x = testing::RandomVector<float>(n * c, 10);
    const auto wte = testing::RandomVector<float>(sc.rows * c, 11, 0.3);
    const auto targets = testing::RandomTokens(n, sc.vocab_valid, 12);
    std::vector<float> dloss(n);
    for (int64_t i = 0; i < n; ++i) dloss[i] = 1.0f + 0.05f * static_cast<float>(i);
    const int64_t buf = n * std::min(sc.chunk, sc.rows);  // n * chunk, or less for a small shard

    std::vector<float> mx(n), se(n), tl(n), lse(n), loss(n), chunk_buf(buf);
    CrossEntropyStats(mx.data(), se.data(), tl.data(), x.data(), wte.data(), targets.data(), s,
                      chunk_buf.data());

    LOOM_ASSERT_OK_AND_ASSIGN(auto d_x, DeviceBuffer<float>::From(x));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_wte, DeviceBuffer<float>::From(wte));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_tgt, DeviceBuffer<int32_t>::From(targets));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_buf, DeviceBuffer<float>::Poisoned(buf));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_mx, DeviceBuffer<float>::Poisoned(n));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_se, DeviceBuffer<float>::Poisoned(n));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_tl, DeviceBuffer<float>::Poisoned(n));
    LOOM_ASSERT_OK(cuda::CrossEntropyStats(handle, d_mx.get(), d_se.get(), d_tl.get(), d_x.get(),
                                           d_wte.get(), d_tgt.get(), s, d_buf.get()));
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_mx, d_mx.Download());
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_se, d_se.Download());
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_tl, d_tl.Download());
    ExpectAllClose(g_mx, mx, 1e-5, 1e-5, "max " + what);
    ExpectAllClose(g_se, se, 1e-5, 1e-6, "sumexp " + what);
    ExpectAllClose(g_tl, tl, 1e-5, 1e-5, "target logit " + what);
    if (sc.vocab_begin >= sc.vocab_valid) {
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(g_mx[i], -std::numeric_limits<float>::infinity()) << what;
        EXPECT_EQ(g_se[i], 0.0f) << what;
      }
      continue;  // lse of an empty shard is -inf: the backward has nothing to compare
    }

    // lse and loss from the shard (a single shard holds the whole valid vocabulary here when
    // vocab_begin is 0; otherwise they are this shard's partial lse, fine for the comparison).
    CrossEntropyFinish(lse.data(), loss.data(), mx.data(), se.data(), tl.data(), n);
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_lse, DeviceBuffer<float>::From(lse));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_loss, DeviceBuffer<float>::Poisoned(n));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_lse2, DeviceBuffer<float>::Poisoned(n));
    LOOM_ASSERT_OK(cuda::CrossEntropyFinish(d_lse2.get(), d_loss.get(), d_mx.get(), d_se.get(),
                                            d_tl.get(), n));
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_lse, d_lse2.Download());
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_loss, d_loss.Download());
    ExpectAllClose(g_lse, lse, 1e-5, 1e-5, "lse " + what);
    ExpectAllClose(g_loss, loss, 1e-5, 1e-5, "loss " + what);

    // Backward from the CPU's lse (the test is about the backward), into gradients that already
    // hold small values; the padding rows of dwte must stay exactly as they were.
    auto dx = testing::RandomVector<float>(n * c, 13, 0.01);
    auto dwte = testing::RandomVector<float>(sc.rows * c, 14, 0.01);
    const auto dwte0 = dwte;
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_dx, DeviceBuffer<float>::From(dx));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_dwte, DeviceBuffer<float>::From(dwte));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_dloss, DeviceBuffer<float>::From(dloss));
    CrossEntropyBackward(dx.data(), dwte.data(), x.data(), wte.data(), targets.data(), lse.data(),
                         dloss.data(), s, chunk_buf.data());
    LOOM_ASSERT_OK(cuda::CrossEntropyBackward(handle, d_dx.get(), d_dwte.get(), d_x.get(),
                                              d_wte.get(), d_tgt.get(), d_lse.get(), d_dloss.get(),
                                              s, d_buf.get()));
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_dx, d_dx.Download());
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_dwte, d_dwte.Download());
    ExpectAllClose(g_dx, dx, 1e-4, 1e-5, "dx " + what);
    ExpectAllClose(g_dwte, dwte, 1e-4, 1e-5, "dwte " + what);
    const int64_t valid_rows = std::clamp<int64_t>(sc.vocab_valid - sc.vocab_begin, 0, sc.rows);
    for (int64_t r = valid_rows; r < sc.rows; ++r) {
      for (int64_t j = 0; j < c; ++j) {
        ASSERT_EQ(g_dwte[r * c + j], dwte0[r * c + j]) << "padding row " << r << " " << what;
      }
    }
    // The gradient moved something (a no-op backward fails here, not only by tolerance).
    EXPECT_NE(g_dx, testing::RandomVector<float>(n * c, 13, 0.01)) << what;
  }
}

}  // namespace
}  // namespace loom
