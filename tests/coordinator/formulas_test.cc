// The planner's closed forms against the papers: ZeRO model states (Rajbhandari et al. 2020),
// activation memory per layer (Korthikanti et al. 2022) and FLOPs per iteration (Narayanan et
// al. 2021), plus the collective cost formulas.
#include <gtest/gtest.h>

#include "coordinator/planner/comm_model.h"
#include "coordinator/planner/memory_model.h"
#include "coordinator/planner/model_math.h"
#include "model/config.h"

namespace loom {
namespace {

TEST(ZeroFormulas, PaperExample) {
  // ZeRO paper, figure 1: 7.5 B parameters, Nd = 64, mixed-precision Adam (K = 12).
  const double psi = 7.5e9;
  const double expected[4] = {120, 31.4, 16.6, 1.9};
  for (int stage = 0; stage < 4; ++stage) {
    const ModelStates s = ZeroModelStates(psi, 64, stage, Precision::kBf16);
    EXPECT_NEAR(s.total() / 1e9, expected[stage], 0.05) << "stage " << stage;
  }
  const ModelStates s1 = ZeroModelStates(psi, 64, 1, Precision::kBf16);
  EXPECT_DOUBLE_EQ(s1.weights, 2 * psi);
  EXPECT_DOUBLE_EQ(s1.grads, 2 * psi);
  EXPECT_DOUBLE_EQ(s1.optimizer, 12 * psi / 64);
  // fp32 training: 4 + 4 + 8 bytes, sharded the same way.
  EXPECT_DOUBLE_EQ(ZeroModelStates(psi, 64, 0, Precision::kFp32).total(), 16 * psi);
  EXPECT_DOUBLE_EQ(ZeroModelStates(psi, 64, 3, Precision::kFp32).total(), 16 * psi / 64);
}

// Loom's executor: fp32 parameters (the master copy) and gradients, m and v; under bf16 a bf16
// copy of the weights too, except under ZeRO 3 (dropped with each released bucket). ZeRO 1-2
// shard less of it than mixed precision's layout above: the master copy stays whole.
TEST(ZeroFormulas, LoomsExecutorStates) {
  const double psi = 7.5e9;
  const double bf16[4][3] = {
      {6, 4, 8}, {6, 4, 8.0 / 64}, {6, 4.0 / 64, 8.0 / 64}, {4.0 / 64, 4.0 / 64, 8.0 / 64}};
  for (int stage = 0; stage < 4; ++stage) {
    const ModelStates s = LoomModelStates(psi, 64, stage, Precision::kBf16);
    EXPECT_DOUBLE_EQ(s.weights, bf16[stage][0] * psi) << "stage " << stage;
    EXPECT_DOUBLE_EQ(s.grads, bf16[stage][1] * psi) << "stage " << stage;
    EXPECT_DOUBLE_EQ(s.optimizer, bf16[stage][2] * psi) << "stage " << stage;
    // fp32: the same as mixed precision's layout of fp32 training.
    EXPECT_DOUBLE_EQ(LoomModelStates(psi, 64, stage, Precision::kFp32).total(),
                     ZeroModelStates(psi, 64, stage, Precision::kFp32).total());
  }
  // ZeRO 1 at Nd 64: 10 bytes a parameter against mixed precision's 4.2.
  EXPECT_GT(LoomModelStates(psi, 64, 1, Precision::kBf16).total(),
            2 * ZeroModelStates(psi, 64, 1, Precision::kBf16).total());
}

// Korthikanti et al. 2022, table 2, with s = 2048, b = 1, h = 12288, a = 96, t = 8.
class ActivationFormulas : public ::testing::Test {
 protected:
  ActivationShape Shape(int tp, bool sp, Recompute r) const {
    ActivationShape a;
    a.micro_batch = b;
    a.seq = s;
    a.hidden = h;
    a.heads = heads;
    a.tp = tp;
    a.sp = sp;
    a.recompute = r;
    a.element_bytes = 2;
    a.dropout = true;
    return a;
  }
  const double s = 2048, b = 1, h = 12288, heads = 96, t = 8;
  const double sbh = s * b * h;
};

TEST_F(ActivationFormulas, KorthikantiTable2) {
  EXPECT_DOUBLE_EQ(LayerActivationBytes(Shape(1, false, Recompute::kNone)),
                   sbh * (34 + 5 * heads * s / h));
  EXPECT_DOUBLE_EQ(LayerActivationBytes(Shape(8, false, Recompute::kNone)),
                   sbh * (10 + 24 / t + 5 * heads * s / (h * t)));
  EXPECT_DOUBLE_EQ(LayerActivationBytes(Shape(8, true, Recompute::kNone)),
                   sbh * (34 / t + 5 * heads * s / (h * t)));
  EXPECT_DOUBLE_EQ(LayerActivationBytes(Shape(8, true, Recompute::kSelective)), sbh * 34 / t);
  EXPECT_DOUBLE_EQ(LayerActivationBytes(Shape(8, false, Recompute::kSelective)),
                   sbh * (10 + 24 / t));
  EXPECT_DOUBLE_EQ(LayerActivationBytes(Shape(8, false, Recompute::kFull)), 2 * sbh);
  EXPECT_DOUBLE_EQ(LayerActivationBytes(Shape(1, false, Recompute::kFull)), 2 * sbh);
  EXPECT_DOUBLE_EQ(LayerActivationBytes(Shape(8, true, Recompute::kFull)), 2 * sbh / t);
}

TEST_F(ActivationFormulas, ContextParallelDividesTokens) {
  ActivationShape a = Shape(8, true, Recompute::kNone);
  a.cp = 4;
  // A rank holds s/cp tokens and s/cp x s scores: the whole expression divides by cp.
  EXPECT_DOUBLE_EQ(LayerActivationBytes(a), sbh / 4 * (34 / t + 5 * heads * s / (h * t)));
}

TEST_F(ActivationFormulas, VariantsFollowTheTensorList) {
  // Without dropout the masks and the dropout output go: 4 + 24/t (x2 bytes) and 2as/(ht).
  ActivationShape a = Shape(8, false, Recompute::kNone);
  a.dropout = false;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(a), sbh * (8 + 24 / t + 2 * heads * s / (h * t)));
  // Fused attention never stores the scores (only a per-row fp32 log-sum-exp).
  a.fused_attention = true;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(a), sbh * (8 + 24 / t) + 4 * b * heads / t * s);
  // fp32 activations double the tensor terms.
  a = Shape(1, false, Recompute::kFull);
  a.element_bytes = 4;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(a), 4 * sbh);
}

TEST_F(ActivationFormulas, LoomsExecutorStorage) {
  // Under bf16 Loom keeps only the GEMM inputs (both LayerNorm outputs, GELU's output) in bf16:
  // tp 1, no dropout, fused attention: 4+2+4+2 replicated, Q K V and the projection input 4 x 4,
  // GELU's input 4h x 4 and output 4h x 2: 52 sbh against mixed precision's 32.
  ActivationShape a = Shape(1, false, Recompute::kNone);
  a.dropout = false;
  a.fused_attention = true;
  const double lse = 4 * b * heads * s;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(a), sbh * 32 + lse);
  a.loom_storage = true;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(a), sbh * 52 + lse);
  // Full recompute keeps the fp32 layer input; fp32 activations are not affected.
  a.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(a), 4 * sbh);
  a = Shape(8, true, Recompute::kSelective);
  a.element_bytes = 4;
  const double fp32 = LayerActivationBytes(a);
  a.loom_storage = true;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(a), fp32);
}

// Against a measured run: GPT-2 124M, micro-batch 8 x 1024 tokens on one device, as
// worker/cuda/gpu_gpt.h's allocator accounted it on an H200 (docs/GPU.md, 2026-11-28): bf16
// parameters 710.3 MiB (fp32 masters and bf16 copies), gradients 474.7 MiB, AdamW 949.4 MiB,
// activations 4,566.3 MiB; fp32 activations 5,254.3 MiB. The model states come out within 0.5 %
// (the model gives every parameter a bf16 copy, the executor only the matrices: +1.8 MiB); the
// activations with the head's logits chunk (8,192 vocabulary rows, fp32 and under bf16 a bf16
// copy) within 10 % (the model leaves out the attention's score workspace and small buffers).
TEST(MemoryModel, MatchesTheGpuStepsAccounting) {
  StageMemoryInput in;
  in.model = ModelConfig{50257, 1024, 12, 12, 768};
  in.seq = 1024;
  in.micro_batch = 8;
  in.dropout = false;
  in.fused_kernels = true;
  in.vocab_chunk = 8192;  // the benchmark's
  const double mib = 1024.0 * 1024.0;
  for (Precision p : {Precision::kBf16, Precision::kFp32}) {
    SCOPED_TRACE(p == Precision::kBf16 ? "bf16" : "fp32");
    in.precision = p;
    const MemoryBreakdown m = StageMemory(in, 0, 1);
    const bool bf16 = p == Precision::kBf16;
    const double weights = bf16 ? 710.3 : 474.7;
    EXPECT_NEAR(m.weights / mib, weights, 0.005 * weights);
    EXPECT_NEAR(m.grads / mib, 474.7, 0.005 * 474.7);
    EXPECT_NEAR(m.optimizer / mib, 949.4, 0.005 * 949.4);
    const double measured = bf16 ? 4566.3 : 5254.3;
    EXPECT_GT((m.activations + m.edges) / mib, 0.90 * measured);
    EXPECT_LT((m.activations + m.edges) / mib, 1.0 * measured);
  }
}

// Communication buffers in what the executor moves: Loom's keeps fp32 gradient buckets and
// gathered fp32 parameters (plus bf16 weight copies of gathered layers under bf16), reduces and
// sends activations in fp32 and gathers only sequence-parallel GEMM inputs in bf16; Megatron's
// mixed precision (published runs) holds and moves all of them in bf16.
TEST(MemoryModel, CommunicationBuffersHoldWhatTheExecutorMoves) {
  StageMemoryInput in;
  in.model = ModelConfig{50257, 1024, 12, 12, 768};
  in.seq = 1024;
  in.micro_batch = 2;
  in.dropout = false;
  const double nh = 1024.0 * 2 * 768;  // a micro-batch's tokens x hidden
  const double layer = LayerParamsPerRank(in.model, 1);
  auto buffers = [&](Layout L, Precision p, bool megatron) {
    in.layout = L;
    in.precision = p;
    in.mixed_precision_states = in.mixed_precision_activations = megatron;
    return StageMemory(in, 0, 1).buffers;
  };
  auto layout = [](int tp, int cp, int pp, int dp, int zero, bool sp) {
    Layout L;
    L.tp = tp, L.cp = cp, L.pp = pp, L.dp = dp, L.zero = zero, L.sp = sp;
    return L;
  };
  const Precision bf16 = Precision::kBf16, fp32 = Precision::kFp32;
  for (bool megatron : {false, true}) {
    SCOPED_TRACE(megatron ? "mixed precision (published runs)" : "Loom's executor");
    // ZeRO-2 gradient buckets, two layers' worth: fp32 in Loom, bf16 in mixed precision.
    const Layout z2 = layout(1, 1, 1, 2, 2, false);
    EXPECT_DOUBLE_EQ(buffers(z2, fp32, megatron), 2 * layer * 4);
    EXPECT_DOUBLE_EQ(buffers(z2, bf16, megatron), 2 * layer * (megatron ? 2 : 4));
    // ZeRO-3 gathered layers (parameters and gradients), with Loom's bf16 copies under bf16.
    const Layout z3 = layout(1, 1, 1, 2, 3, false);
    EXPECT_DOUBLE_EQ(buffers(z3, fp32, megatron), 2 * layer * 8);
    EXPECT_DOUBLE_EQ(buffers(z3, bf16, megatron), 2 * layer * (megatron ? 4 : 10));
    // Tensor parallelism: a gather buffer (bf16 under SP in both) and a reduction buffer.
    const Layout tp = layout(2, 1, 1, 1, 0, true);
    EXPECT_DOUBLE_EQ(buffers(tp, fp32, megatron), 8 * nh);
    EXPECT_DOUBLE_EQ(buffers(tp, bf16, megatron), (megatron ? 4 : 6) * nh);
    // Pipeline sends and receives of the residual stream, and ring attention's K/V blocks.
    for (const Layout& L : {layout(1, 1, 2, 1, 0, false), layout(1, 2, 1, 1, 0, false)}) {
      EXPECT_DOUBLE_EQ(buffers(L, bf16, megatron) / buffers(L, fp32, megatron),
                       megatron ? 0.5 : 1.0);
    }
  }
}

TEST(FlopFormulas, MatchNarayananClosedForm) {
  // Every GEMM counted op by op must add up to 96 B s l h^2 (1 + s/6h + V/(16 l h)).
  struct Case {
    int64_t heads, hidden, layers, batch;
  };
  for (const Case& c : {Case{24, 2304, 24, 512}, Case{96, 12288, 80, 2304},
                        Case{160, 25600, 128, 3072}, Case{8, 256, 4, 8}}) {
    ModelConfig m{51200, 2048, c.layers, c.heads, c.hidden};
    const double ops = IterationFlops(m, c.batch, 2048, Recompute::kFull);
    EXPECT_NEAR(ops / MegatronFlops(m, c.batch, 2048), 1.0, 1e-12) << c.hidden;
    // Without recompute: 72 B s l h^2 (1 + s/6h + V/(12 l h)).
    const double b = c.batch, s = 2048, l = c.layers, h = c.hidden, v = 51200;
    EXPECT_NEAR(ModelFlops(m, c.batch, 2048) /
                    (72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h))),
                1.0, 1e-12);
  }
}

TEST(FlopFormulas, ParameterCounts) {
  // The 145.6 B model of Narayanan et al.: 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)).
  ModelConfig m{51200, 2048, 80, 96, 12288};
  EXPECT_NEAR(TotalParams(m) / 1e9, 145.6, 0.1);
  ModelConfig t{51200, 2048, 128, 160, 25600};
  EXPECT_NEAR(TotalParams(t) / 1e9, 1008, 1);
  // Tensor-parallel shards add up to the layer, counting replicated tensors once per rank.
  const double h = 12288;
  EXPECT_DOUBLE_EQ(8 * LayerParamsPerRank(m, 8) - 7 * 6 * h, LayerParams(m));
}

TEST(CommFormulas, RingAndTree) {
  GroupPath g;
  g.size = 8;
  g.nodes = 1;
  g.latency = 1e-5;
  g.bandwidth = 1e11;
  // Ring all-reduce: 2(N-1) alpha + 2(N-1)/N S / B.
  EXPECT_DOUBLE_EQ(RingAllReduce(g, 1e9), 14 * 1e-5 + 2 * 7.0 / 8 * 1e9 / 1e11);
  EXPECT_DOUBLE_EQ(ReduceScatter(g, 1e9), 7 * 1e-5 + 7.0 / 8 * 1e9 / 1e11);
  EXPECT_DOUBLE_EQ(AllGather(g, 1e9), ReduceScatter(g, 1e9));
  // Inside a node only the ring is used.
  Algo algo = Algo::kTree;
  EXPECT_DOUBLE_EQ(AllReduce(g, 1e3, &algo), RingAllReduce(g, 1e3));
  EXPECT_EQ(algo, Algo::kRing);
  // Across many nodes the tree wins for small messages (latency) and the ring for large ones.
  g.size = 64;
  g.nodes = 8;
  AllReduce(g, 1e3, &algo);
  EXPECT_EQ(algo, Algo::kTree);
  AllReduce(g, 1e10, &algo);
  EXPECT_EQ(algo, Algo::kRing);
  EXPECT_EQ(AllReduce(GroupPath{}, 1e9), 0);  // one member: nothing to do
}

// Members that compute between collectives arrive apart: each collective and hop waits once
// for the latest (GroupPath::sync_wait), on top of the formula or the measured time.
TEST(CommFormulas, SyncWaitAddsOncePerCollective) {
  GroupPath g;
  g.size = 4;
  g.latency = 1e-5;
  g.bandwidth = 1e9;
  GroupPath late = g;
  late.sync_wait = 2e-4;
  EXPECT_DOUBLE_EQ(AllReduce(late, 1e6) - AllReduce(g, 1e6), 2e-4);
  EXPECT_DOUBLE_EQ(ReduceScatter(late, 1e6) - ReduceScatter(g, 1e6), 2e-4);
  EXPECT_DOUBLE_EQ(AllGather(late, 1e6) - AllGather(g, 1e6), 2e-4);
  EXPECT_DOUBLE_EQ(PointToPoint(late, 1e6) - PointToPoint(g, 1e6), 2e-4);
  late.nodes = g.nodes = 2;  // the tree too
  EXPECT_DOUBLE_EQ(TreeAllReduce(late, 1e3) - TreeAllReduce(g, 1e3), 2e-4);
  MeasuredCollectives m;
  m.Add(CollOp::kAllGather, 4, 1e6, 1e-4);
  m.Add(CollOp::kSendRecv, 2, 1e6, 3e-4);
  late.nodes = 1;
  late.measured = &m;
  EXPECT_DOUBLE_EQ(AllGather(late, 1e6), 1e-4 + 2e-4);
  EXPECT_DOUBLE_EQ(PointToPoint(late, 1e6), 3e-4 + 2e-4);
  EXPECT_EQ(AllReduce(GroupPath{}, 1e9), 0);  // one member waits for nobody
}

TEST(CommFormulas, MeasuredCollectivesReplaceTheFormulas) {
  MeasuredCollectives m;
  m.Add(CollOp::kAllReduce, 2, 1e6, 1e-3);
  m.Add(CollOp::kAllReduce, 2, 4e6, 2e-3);
  m.Add(CollOp::kAllReduce, 2, 4e6, 4e-3);  // measured twice: the median of two, 3 ms
  m.Add(CollOp::kAllGather, 2, 1e6, 1e-4);
  m.Add(CollOp::kSendRecv, 2, 1e6, 2e-4);
  EXPECT_DOUBLE_EQ(m.Time(CollOp::kAllReduce, 2, 4e6), 3e-3);
  EXPECT_DOUBLE_EQ(m.Time(CollOp::kAllReduce, 2, 2.5e6), 2e-3);  // linear in between
  EXPECT_DOUBLE_EQ(m.Time(CollOp::kAllReduce, 2, 8e6), 6e-3);    // the largest one's rate
  EXPECT_DOUBLE_EQ(m.Time(CollOp::kAllReduce, 2, 1e3), 1e-3);    // no faster than the smallest
  m.Add(CollOp::kSendRecv, 2, 2e6, 3e-4);
  m.Add(CollOp::kSendRecv, 2, 2e6, 9e-4);  // one slow calibration of three does not count
  m.Add(CollOp::kSendRecv, 2, 2e6, 4e-4);
  EXPECT_DOUBLE_EQ(m.Time(CollOp::kSendRecv, 2, 2e6), 4e-4);
  EXPECT_LT(m.Time(CollOp::kReduceScatter, 2, 1e6), 0);  // never measured
  EXPECT_LT(m.Time(CollOp::kAllReduce, 4, 1e6), 0);      // nor for 4 ranks
  EXPECT_TRUE(m.Has(2));
  EXPECT_FALSE(m.Has(4));

  GroupPath g;
  g.size = 2;
  g.latency = 1e-5;
  g.bandwidth = 1e9;
  g.measured = &m;
  // An all-gather on shared memory is a copy, an all-reduce also adds: one alpha and one
  // bandwidth (1 ms per MB from the all-reduce) would price the all-gather 5x too slow.
  EXPECT_DOUBLE_EQ(AllReduce(g, 1e6), 1e-3);
  EXPECT_DOUBLE_EQ(AllGather(g, 1e6), 1e-4);
  EXPECT_DOUBLE_EQ(PointToPoint(g, 1e6), 2e-4);
  // Not measured: the formula.
  EXPECT_DOUBLE_EQ(ReduceScatter(g, 1e6), 1e-5 + 0.5 * 1e6 / 1e9);
  g.size = 4;  // a hop is between two ranks whatever the group size; the rest is the formula
  EXPECT_DOUBLE_EQ(PointToPoint(g, 1e6), 2e-4);
  EXPECT_DOUBLE_EQ(AllGather(g, 1e6), 3 * 1e-5 + 0.75 * 1e6 / 1e9);
}

}  // namespace
}  // namespace loom
