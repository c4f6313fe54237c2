// Causal attention on the GPU (flash-style, online softmax over key tiles; and through batched
// GEMMs, attention_gemm.h) against the CPU block kernels: out, lse and dqkv, with sequence lengths
// that leave partial query and key tiles, head dimensions that are not multiples of 32 and one
// large enough to need more than 48 KiB of shared memory; plus a direct check that the future is
// masked (changing later keys and values leaves earlier outputs bit-identical).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/cuda/attention_gemm.h"
#include "core/cuda/gemm.h"
#include "core/cuda/kernels.h"
#include "core/kernels/attention.h"
#include "tests/core/cuda_test_util.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::DeviceBuffer;
using testing::ExpectAllClose;

AttentionShape Shape(int64_t b, int64_t t, int64_t h, int64_t hd) {
  AttentionShape s;
  s.batch = b;
  s.seq = t;
  s.heads = h;
  s.head_dim = hd;
  s.block_q = 16;  // CPU blocks of other sizes than the GPU tiles
  s.block_k = 24;
  return s;
}

std::string Name(const AttentionShape& s) {
  return "B=" + std::to_string(s.batch) + " T=" + std::to_string(s.seq) +
         " H=" + std::to_string(s.heads) + " hd=" + std::to_string(s.head_dim);
}

const std::vector<AttentionShape>& Shapes() {
  static const std::vector<AttentionShape> shapes = {
      Shape(2, 37, 3, 24),   // partial tiles everywhere, hd < 32 (idle lanes)
      Shape(1, 70, 2, 64),   // GPT-2's head size, three key tiles
      Shape(1, 1, 1, 8),     // a single token
      Shape(1, 45, 1, 200),  // hd not a multiple of 32, > 48 KiB of shared memory in the backward
      Shape(2, 33, 2, 256),  // the largest head supported
  };
  return shapes;
}

// Forward: exp and the summation order differ (tiles of 32 keys vs the CPU's blocks), 1e-4.
TEST(CudaAttention, ForwardMatchesCpu) {
  LOOM_REQUIRE_GPU();
  uint64_t seed = 60;
  for (const AttentionShape& s : Shapes()) {
    const int64_t c = s.heads * s.head_dim, bt = s.batch * s.seq;
    const auto qkv = testing::RandomVector<float>(bt * 3 * c, ++seed);
    std::vector<float> out(bt * c), lse(s.batch * s.heads * s.seq);
    AttentionForward(out.data(), lse.data(), qkv.data(), s);
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_qkv, DeviceBuffer<float>::From(qkv));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_out, DeviceBuffer<float>::Poisoned(out.size()));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_lse, DeviceBuffer<float>::Poisoned(lse.size()));
    LOOM_ASSERT_OK(cuda::AttentionForward(d_out.get(), d_lse.get(), d_qkv.get(), s));
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_out, d_out.Download());
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_lse, d_lse.Download());
    ExpectAllClose(g_out, out, 1e-4, 1e-4, "attention out " + Name(s));
    ExpectAllClose(g_lse, lse, 1e-4, 1e-4, "attention lse " + Name(s));
  }
}

// Row 0 attends to key 0 only; every row t must ignore keys after t. Changing the keys and values
// of positions >= p leaves out and lse of rows < p bit-identical, and changes row p.
TEST(CudaAttention, FutureIsMasked) {
  LOOM_REQUIRE_GPU();
  const AttentionShape s = Shape(1, 50, 2, 40);
  const int64_t c = s.heads * s.head_dim, t = s.seq, p = 33;  // p inside the second key tile
  auto qkv = testing::RandomVector<float>(t * 3 * c, 70);
  LOOM_ASSERT_OK_AND_ASSIGN(auto d_qkv, DeviceBuffer<float>::From(qkv));
  LOOM_ASSERT_OK_AND_ASSIGN(auto d_out, DeviceBuffer<float>::Poisoned(t * c));
  LOOM_ASSERT_OK_AND_ASSIGN(auto d_lse, DeviceBuffer<float>::Poisoned(s.heads * t));
  LOOM_ASSERT_OK(cuda::AttentionForward(d_out.get(), d_lse.get(), d_qkv.get(), s));
  LOOM_ASSERT_OK_AND_ASSIGN(auto out1, d_out.Download());
  LOOM_ASSERT_OK_AND_ASSIGN(auto lse1, d_lse.Download());
  for (int64_t pos = p; pos < t; ++pos) {
    for (int64_t j = c; j < 3 * c; ++j) qkv[pos * 3 * c + j] *= -3.0f;  // k and v only
  }
  LOOM_ASSERT_OK(d_qkv.Upload(qkv));
  LOOM_ASSERT_OK(cuda::AttentionForward(d_out.get(), d_lse.get(), d_qkv.get(), s));
  LOOM_ASSERT_OK_AND_ASSIGN(auto out2, d_out.Download());
  LOOM_ASSERT_OK_AND_ASSIGN(auto lse2, d_lse.Download());
  for (int64_t i = 0; i < p * c; ++i)
    ASSERT_EQ(out1[i], out2[i]) << "row " << i / c << " saw the future";
  for (int64_t h = 0; h < s.heads; ++h) {
    for (int64_t i = 0; i < p; ++i) ASSERT_EQ(lse1[h * t + i], lse2[h * t + i]) << "lse row " << i;
  }
  bool row_p_changed = false;
  for (int64_t j = 0; j < c; ++j) row_p_changed |= out1[p * c + j] != out2[p * c + j];
  EXPECT_TRUE(row_p_changed) << "row " << p << " ignored its own key";
  // Row 0 sees key 0 only: its output is v_0 exactly up to rounding, and its lse the one score.
  for (int64_t h = 0; h < s.heads; ++h) {
    for (int64_t d = 0; d < s.head_dim; ++d) {
      ASSERT_NEAR(out2[h * s.head_dim + d], qkv[2 * c + h * s.head_dim + d], 1e-6) << "head " << h;
    }
  }
}

// Backward: dqkv is overwritten (the buffer starts as NaN), dq summed over key tiles by atomics.
TEST(CudaAttention, BackwardMatchesCpu) {
  LOOM_REQUIRE_GPU();
  uint64_t seed = 80;
  for (const AttentionShape& s : Shapes()) {
    const int64_t c = s.heads * s.head_dim, bt = s.batch * s.seq;
    const auto qkv = testing::RandomVector<float>(bt * 3 * c, ++seed);
    const auto dout = testing::RandomVector<float>(bt * c, ++seed);
    std::vector<float> out(bt * c), lse(s.batch * s.heads * s.seq), dqkv(bt * 3 * c, 5.0f);
    AttentionForward(out.data(), lse.data(), qkv.data(), s);
    AttentionBackward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), s);
    // The GPU backward gets the CPU forward's out and lse: this test is about the backward alone.
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_qkv, DeviceBuffer<float>::From(qkv));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_out, DeviceBuffer<float>::From(out));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_lse, DeviceBuffer<float>::From(lse));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_dout, DeviceBuffer<float>::From(dout));
    LOOM_ASSERT_OK_AND_ASSIGN(auto d_dqkv, DeviceBuffer<float>::Poisoned(dqkv.size()));
    LOOM_ASSERT_OK(cuda::AttentionBackward(d_dqkv.get(), d_dout.get(), d_qkv.get(), d_out.get(),
                                           d_lse.get(), s));
    LOOM_ASSERT_OK_AND_ASSIGN(auto g_dqkv, d_dqkv.Download());
    ExpectAllClose(g_dqkv, dqkv, 1e-4, 1e-4, "attention dqkv " + Name(s));
  }
}

// The GEMM path (attention_gemm.h) against the same CPU kernels, with a workspace for one head at
// a time and one for every head: out, lse and dqkv (NaN-poisoned first) within 1e-4.
TEST(CudaAttention, GemmPathMatchesCpu) {
  LOOM_REQUIRE_GPU();
  LOOM_ASSERT_OK_AND_ASSIGN(auto handle, cuda::GemmHandle::Create());
  uint64_t seed = 90;
  for (const AttentionShape& s : Shapes()) {
    const int64_t c = s.heads * s.head_dim, bt = s.batch * s.seq;
    const auto qkv = testing::RandomVector<float>(bt * 3 * c, ++seed);
    const auto dout = testing::RandomVector<float>(bt * c, ++seed);
    std::vector<float> out(bt * c), lse(s.batch * s.heads * s.seq), dqkv(bt * 3 * c);
    AttentionForward(out.data(), lse.data(), qkv.data(), s);
    AttentionBackward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), s);
    const int64_t one_head = 2 * s.seq * s.seq;
    for (int64_t ws_floats : {one_head, s.heads * one_head}) {
      const std::string name = Name(s) + " workspace for " +
                               std::to_string(cuda::AttentionGemmHeadsPerPass(s, ws_floats, true)) +
                               " head(s)";
      LOOM_ASSERT_OK_AND_ASSIGN(auto d_ws, DeviceBuffer<float>::Poisoned(ws_floats));
      LOOM_ASSERT_OK_AND_ASSIGN(auto d_qkv, DeviceBuffer<float>::From(qkv));
      LOOM_ASSERT_OK_AND_ASSIGN(auto d_out, DeviceBuffer<float>::Poisoned(out.size()));
      LOOM_ASSERT_OK_AND_ASSIGN(auto d_lse, DeviceBuffer<float>::Poisoned(lse.size()));
      LOOM_ASSERT_OK(cuda::AttentionForwardGemm(handle, d_out.get(), d_lse.get(), d_qkv.get(), s,
                                                d_ws.get(), ws_floats));
      LOOM_ASSERT_OK_AND_ASSIGN(auto g_out, d_out.Download());
      LOOM_ASSERT_OK_AND_ASSIGN(auto g_lse, d_lse.Download());
      ExpectAllClose(g_out, out, 1e-4, 1e-4, "gemm attention out " + name);
      ExpectAllClose(g_lse, lse, 1e-4, 1e-4, "gemm attention lse " + name);
      // The backward from the CPU forward's out and lse, as BackwardMatchesCpu.
      LOOM_ASSERT_OK(d_out.Upload(out));
      LOOM_ASSERT_OK(d_lse.Upload(lse));
      LOOM_ASSERT_OK_AND_ASSIGN(auto d_dout, DeviceBuffer<float>::From(dout));
      LOOM_ASSERT_OK_AND_ASSIGN(auto d_dqkv, DeviceBuffer<float>::Poisoned(dqkv.size()));
      LOOM_ASSERT_OK(cuda::AttentionBackwardGemm(handle, d_dqkv.get(), d_dout.get(), d_qkv.get(),
                                                 d_out.get(), d_lse.get(), s, d_ws.get(),
                                                 ws_floats));
      LOOM_ASSERT_OK_AND_ASSIGN(auto g_dqkv, d_dqkv.Download());
      ExpectAllClose(g_dqkv, dqkv, 1e-4, 1e-4, "gemm attention dqkv " + name);
    }
  }
}

// How many heads a workspace holds: host arithmetic, runs without a GPU too.
TEST(CudaAttention, GemmHeadsPerPass) {
  const AttentionShape s = Shape(2, 100, 12, 64);
  EXPECT_EQ(cuda::AttentionGemmHeadsPerPass(s, 100 * 100 - 1, false), 0);
  EXPECT_EQ(cuda::AttentionGemmHeadsPerPass(s, 100 * 100, false), 1);
  EXPECT_EQ(cuda::AttentionGemmHeadsPerPass(s, 100 * 100, true), 0);
  EXPECT_EQ(cuda::AttentionGemmHeadsPerPass(s, 5 * 2 * 100 * 100 + 7, true), 5);
  EXPECT_EQ(cuda::AttentionGemmHeadsPerPass(s, int64_t{1} << 40, true), 12);
  EXPECT_EQ(cuda::AttentionGemmHeadsPerPass(s, 0, false), 0);
}

// Checked before anything touches the device: runs without a GPU too.
TEST(CudaAttention, UnsupportedHeadDimIsRefused) {
  const AttentionShape s = Shape(1, 4, 1, cuda::kMaxAttentionHeadDim + 1);
  const Status st = cuda::AttentionForward(nullptr, nullptr, nullptr, s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
}

}  // namespace
}  // namespace loom
