// The time model's communication against what the runtime does (parallel/zero/,
// worker/gpt.cc) and against the ZeRO paper: bytes per step, exposure when transfers outlast the
// compute they overlap, the unprefetched first gather of every chunk, the dK/dV hops of ring
// attention, links shared by several dimensions, and compute slowed by overlapped transfers.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>

#include "coordinator/planner/layer_model.h"
#include "coordinator/planner/model_math.h"
#include "coordinator/planner/overlap_model.h"
#include "coordinator/planner/search.h"
#include "coordinator/planner/time_model.h"
#include "model/config.h"
#include "tests/coordinator/planner_test_util.h"
#include "tests/temp_dir.h"

namespace loom {
namespace {

TEST(OverlapFormulas, ExcessOverTheWindowShows) {
  LinkLoad alone;
  alone.busy[kInterNode] = 3;
  // A 3 s transfer behind 1 s of compute: 2 s show, all of it the transfer's own.
  Exposure e = Overlap(1, 1, 3, alone, 3, 0);
  EXPECT_DOUBLE_EQ(e.own, 2);
  EXPECT_DOUBLE_EQ(e.shared, 0);
  // Behind 5 s nothing shows.
  EXPECT_DOUBLE_EQ(Overlap(5, 5, 3, alone, 3, 0).total(), 0);
  // Another dimension puts 4 s on the same link: together they need 7 s of a 5 s window.
  LinkLoad both = alone;
  both.busy[kInterNode] += 4;
  e = Overlap(5, 5, 3, both, 7, 0);
  EXPECT_DOUBLE_EQ(e.own, 0);
  EXPECT_DOUBLE_EQ(e.shared, 2);
  // On different links they do not interfere.
  LinkLoad apart = alone;
  apart.busy[kIntraNode] = 4;
  EXPECT_DOUBLE_EQ(Overlap(5, 5, 3, apart, 7, 0).total(), 0);
  // Compute overlapping 3 s of transfer at 15 % slowdown takes 0.45 s longer.
  e = Overlap(5, 5, 3, alone, 3, 0.15);
  EXPECT_DOUBLE_EQ(e.slowdown, 0.45);
  // When the link already extends the window by more, the slower compute hides in it.
  EXPECT_DOUBLE_EQ(Overlap(1, 1, 3, alone, 3, 0.15).slowdown, 0);
  // CPU ranks move the bytes with their own cores: 3 s of transfer cost 6 s of compute at 2.
  EXPECT_DOUBLE_EQ(Overlap(10, 10, 3, alone, 3, 2).slowdown, 6);
  // ... at most for as long as there is compute to overlap.
  EXPECT_DOUBLE_EQ(Overlap(5, 2, 3, alone, 3, 2).slowdown, 4);
}

TEST(OverlapFormulas, SerialChainOfBuckets) {
  // Four 1 s reductions issued as an 8 s backward progresses: only the last one shows.
  EXPECT_DOUBLE_EQ(SerialChainExposed(4, 1, 8), 1);
  // Behind a 2 s backward the chain ends 4 s after the first bucket (0.5 s): 2.5 s past it.
  EXPECT_DOUBLE_EQ(SerialChainExposed(4, 1, 2), 2.5);
  EXPECT_DOUBLE_EQ(SerialChainExposed(1, 3, 100), 3);
  EXPECT_DOUBLE_EQ(SerialChainExposed(0, 3, 1), 0);
}

// `c` written by CalibrationToJson and read back through a file in the test's directory.
Calibration RoundTrip(const Calibration& c, const std::string& name) {
  const std::string path = testing::TestTempPath(name);
  std::ofstream(path) << CalibrationToJson(c);
  Result<Calibration> back = LoadCalibration(path);
  EXPECT_TRUE(back.ok()) << back.status().ToString();
  return back.ok() ? *back : Calibration{};
}

// The message of loading `json` (a calibration file's text), which must fail.
std::string LoadError(const std::string& json) {
  const std::string path = testing::TestTempPath("bad.json");
  std::ofstream(path) << json;
  Result<Calibration> bad = LoadCalibration(path);
  EXPECT_FALSE(bad.ok()) << json;
  return bad.ok() ? "" : bad.status().message();
}

TEST(CalibrationFile, OverlapSlowdown) {
  EXPECT_DOUBLE_EQ(LoadShippedCalibration("dgx-a100.calibration.json").overlap_slowdown, 0.15);
  EXPECT_DOUBLE_EQ(Calibration{}.overlap_slowdown, 0);  // not calibrated: overlap is free
  Calibration c;
  c.overlap_slowdown = 0.2;
  EXPECT_DOUBLE_EQ(RoundTrip(c, "cal.json").overlap_slowdown, 0.2);
  // CPU ranks lose more than the transfer's own time (calibration.h): above 1 is valid.
  c.overlap_slowdown = 2.5;
  EXPECT_DOUBLE_EQ(RoundTrip(c, "cpu.json").overlap_slowdown, 2.5);
  EXPECT_NE(LoadError(R"({"format": "loom-calibration", "version": 1,
                          "compute": {"overlap_slowdown": 12}})")
                .find("compute.overlap_slowdown"),
            std::string::npos);
}

TEST(CalibrationFile, TimeSharing) {
  Calibration c;
  EXPECT_TRUE(RoundTrip(c, "none.json").time_sharing.empty());
  c.time_sharing.push_back({4, 2, 0.93});
  const Calibration back = RoundTrip(c, "ts.json");
  ASSERT_EQ(back.time_sharing.size(), 1u);
  EXPECT_EQ(back.time_sharing[0].ranks, 4);
  EXPECT_EQ(back.time_sharing[0].cores, 2);
  EXPECT_DOUBLE_EQ(back.time_sharing[0].efficiency, 0.93);
  EXPECT_NE(LoadError(R"({"format": "loom-calibration", "version": 1, "compute":
                          {"time_sharing": [{"ranks": 4, "cores": 2, "efficiency": 7}]}})")
                .find("compute.time_sharing[].efficiency"),
            std::string::npos);
  EXPECT_NE(LoadError(R"({"format": "loom-calibration", "version": 1, "compute":
                          {"time_sharing": [{"ranks": 4, "efficiency": 0.9}]}})")
                .find("expected ranks, cores and efficiency"),
            std::string::npos);
}

// A calibration's GEMM samples price only jobs of its precision; on CPU cores, where Loom runs
// attention in fp32 in either precision, its attention samples price both, and without them
// attention is priced at the fp32 peak. On GPUs both kinds of samples are set aside.
TEST(CalibrationFile, SamplesOfAnotherPrecision) {
  Calibration c;
  c.has_precision = true;
  c.precision = Precision::kFp32;
  c.gemm = {{256, 256, 256, 1, 100e9}};
  c.attention = {{128, 32, 1, 50e9}};
  const Cluster cpu = LoadShippedCluster("localhost.yaml");
  const Hardware fp32 = MakeHardware(cpu, 0, c, Precision::kFp32, 1);
  const Hardware bf16 = MakeHardware(cpu, 0, c, Precision::kBf16, 1);
  EXPECT_EQ(fp32.gemm.size(), 1u);
  EXPECT_TRUE(bf16.gemm.empty());
  EXPECT_EQ(bf16.attention.size(), 1u);
  EXPECT_DOUBLE_EQ(bf16.AttentionTime(1e9, 128, 32), fp32.AttentionTime(1e9, 128, 32));
  EXPECT_GT(bf16.peak, fp32.peak);  // the manifest's bf16 peak for the GEMMs
  const Hardware bare = MakeHardware(cpu, 0, Calibration{}, Precision::kBf16, 1);
  EXPECT_DOUBLE_EQ(bare.attention_peak, cpu.types[0].Peak(Precision::kFp32));
  EXPECT_EQ(CalibrationPrecisionNote(c, Precision::kFp32), "");
  EXPECT_NE(CalibrationPrecisionNote(c, Precision::kBf16).find("measured in fp32"),
            std::string::npos);
  const Cluster gpu = LoadShippedCluster("dgx-a100.yaml");
  const Hardware on_gpu = MakeHardware(gpu, 0, c, Precision::kBf16, 1);
  EXPECT_TRUE(on_gpu.gemm.empty());
  EXPECT_TRUE(on_gpu.attention.empty());
  EXPECT_DOUBLE_EQ(on_gpu.attention_peak, on_gpu.peak);
}

TEST(CalibrationFile, Zero3RankBandwidth) {
  EXPECT_DOUBLE_EQ(LoadShippedCalibration("dgx-a100.calibration.json").zero3_rank_bandwidth,
                   15.7e9);
  EXPECT_LT(LoadShippedCalibration("dgx-h100.calibration.json").zero3_rank_bandwidth, 0);
  Calibration c;
  EXPECT_LT(RoundTrip(c, "none.json").zero3_rank_bandwidth, 0);  // absent: the links alone
  c.zero3_rank_bandwidth = 2e10;
  EXPECT_DOUBLE_EQ(RoundTrip(c, "z3.json").zero3_rank_bandwidth, 2e10);
  EXPECT_NE(LoadError(R"({"format": "loom-calibration", "version": 1,
                          "links": {"zero3_rank_bandwidth": 0}})")
                .find("links.zero3_rank_bandwidth"),
            std::string::npos);
}

// loom calibrate under mpirun measures each group size with every rank busy in a group of
// consecutive ranks where the world holds one (idle ranks held shared cores: PLANNER.md).
TEST(CalibrationGroups, EveryRankMeasuresWhereAGroupFits) {
  using V = std::vector<int>;
  EXPECT_EQ(CalibrationGroup(0, 4, 2), (V{0, 1}));
  EXPECT_EQ(CalibrationGroup(1, 4, 2), (V{0, 1}));
  EXPECT_EQ(CalibrationGroup(2, 4, 2), (V{2, 3}));
  EXPECT_EQ(CalibrationGroup(3, 4, 2), (V{2, 3}));
  EXPECT_EQ(CalibrationGroup(2, 4, 3), (V{0, 1, 2}));
  EXPECT_TRUE(CalibrationGroup(3, 4, 3).empty());  // 4 % 3: sits the triples out
  EXPECT_EQ(CalibrationGroup(3, 4, 4), (V{0, 1, 2, 3}));
  // Every size of 2..12 ranks: the groups are disjoint, each rank is in its own, rank 0 always
  // measures (it writes the file), and only world % size ranks sit out.
  for (int world = 2; world <= 12; ++world) {
    for (int size = 2; size <= world; ++size) {
      int out = 0;
      for (int r = 0; r < world; ++r) {
        const V g = CalibrationGroup(r, world, size);
        if (g.empty()) {
          ++out;
          continue;
        }
        ASSERT_EQ(static_cast<int>(g.size()), size) << world << " " << size << " " << r;
        EXPECT_NE(std::find(g.begin(), g.end(), r), g.end());
        for (int m : g) EXPECT_EQ(CalibrationGroup(m, world, size), g);
      }
      EXPECT_EQ(out, world % size) << world << " " << size;
      EXPECT_FALSE(CalibrationGroup(0, world, size).empty());
    }
  }
}

// The 145.6 B GPT of Narayanan et al. on the shipped A100 cluster and calibration, priced
// layout by layout. These tests check how ZeRO's buckets ride NCCL's rings, so the fixture
// drops the file's ZeRO-3 bound (DeepSpeed's 2021 rate, held in published_runs_test.cc).
class GptOnA100 : public ::testing::Test {
 protected:
  GptOnA100()
      : cluster_(LoadShippedCluster("dgx-a100.yaml")),
        job_(MegatronJob(96, 12288, 80, 2304, 1536)),
        place_(*PlaceRanks(cluster_, NodePool(cluster_, nullptr), 1536)) {
    cal_ = LoadShippedCalibration("dgx-a100.calibration.json");
    cal_.zero3_rank_bandwidth = -1;
    Rebuild();
  }
  void Rebuild() {
    hw_ = MakeHardware(cluster_, place_.type, cal_, job_.precision, 1);
    paths_ = std::make_unique<PathCache>(cluster_, place_, hw_);
    model_ = std::make_unique<TimeModel>(job_, hw_, place_, paths_.get(), &pipeline_);
  }
  static Candidate Make(int tp, int cp, int pp, int vpp, int zero, int mb, Recompute rc) {
    Candidate c;
    c.layout = Layout{tp, cp, pp, vpp, 1536 / (tp * cp * pp), zero, tp > 1};
    c.micro_batch = mb;
    c.recompute = rc;
    c.schedule = vpp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1F1B;
    return c;
  }
  Prediction Price(const Candidate& c) {
    Result<Prediction> p = model_->Predict(c);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_LE(p->links.Max(), p->time.step * (1 + 1e-12)) << "a link busier than the step";
    return *p;
  }
  Cluster cluster_;
  PlanJob job_;
  RankPlacement place_;
  Calibration cal_;
  Hardware hw_;
  PipelineModel pipeline_;
  std::unique_ptr<PathCache> paths_;
  std::unique_ptr<TimeModel> model_;
};

// What the old planner recommended: ZeRO 3 over dp x cp = 768 ranks, 2 micro-batches of 3.
Candidate OldChoice() {
  Candidate c;
  c.layout = Layout{2, 2, 1, 1, 384, 3, true};
  c.micro_batch = 3;
  c.recompute = Recompute::kSelective;
  return c;
}

TEST_F(GptOnA100, Zero3BytesPerStep) {
  const Prediction p = Price(OldChoice());
  ASSERT_EQ(p.micro_batches, 2);
  // Every micro-batch gathers each layer's tensor-parallel shard in the forward and again in the
  // backward and reduce-scatters its gradient: 3 x 2 bytes per parameter, (N-1)/N of it sent by
  // each rank of the ring; the embedding bucket is gathered once per step and reduce-scattered
  // per micro-batch.
  const double n = 768, ring = (n - 1) / n;
  const double layer = LayerParamsPerRank(job_.model, 2),
               emb = EmbeddingParamsPerRank(job_.model, 2);
  const double per_micro_batch = 80 * layer * (2 + 2 + 2) + emb * 2;
  EXPECT_NEAR(p.bytes.dp, ring * (2 * per_micro_batch + emb * 2), 1e3);
  EXPECT_NEAR(p.bytes.dp / 1e9, 870.7, 0.1);  // against 145.6 GB of bf16 weights in the shard
  // The ZeRO paper's 1.5x of data parallelism holds per micro-batch: ZeRO 0 all-reduces the
  // gradients (2 x 2 bytes per parameter) once per step.
  Candidate z0 = OldChoice();
  z0.layout.zero = 0;
  const Prediction q = Price(z0);
  EXPECT_NEAR(p.bytes.dp - ring * emb * 6, 1.5 * p.micro_batches * (q.bytes.dp - ring * emb * 4),
              1e3);
  // All of it crosses the network: 4 members of each ring per node, so half the node's 185 GB/s
  // per rank; the link is busy 13.1 s of the step.
  EXPECT_DOUBLE_EQ(paths_->Ring(2, 768).bandwidth, 185e9 / 2);
  EXPECT_GT(p.links.busy[kInterNode], 13.0);
  EXPECT_LE(p.links.busy[kInterNode], p.time.step);
}

// A job file is priced for Loom's executor, which reduces fp32 gradients and gathers fp32
// parameters under bf16: twice the half-precision bytes of the published runs, for ZeRO 3's
// gathers and reduce-scatters and ZeRO 0's all-reduce alike, and more of the step on the link.
TEST_F(GptOnA100, LoomsBf16DataParallelTrafficIsFp32) {
  const Prediction half = Price(OldChoice());
  Candidate z0 = OldChoice();
  z0.layout.zero = 0;
  const Prediction half0 = Price(z0);
  job_.grad_comm_bytes = 0;  // Loom's own
  job_.param_comm_bytes = 0;
  Rebuild();
  const Prediction full = Price(OldChoice());
  EXPECT_NEAR(full.bytes.dp, 2 * half.bytes.dp, 1e3);
  EXPECT_NEAR(Price(z0).bytes.dp, 2 * half0.bytes.dp, 1e3);
  EXPECT_GT(full.links.busy[kInterNode], 1.5 * half.links.busy[kInterNode]);  // pp shares it
  EXPECT_GE(full.time.step, half.time.step);
  // Gradients alone at 4 bytes (Meta's Llama 3): ZeRO 0 moves only gradients, so all of it.
  job_.grad_comm_bytes = 4;
  job_.param_comm_bytes = 2;
  Rebuild();
  EXPECT_NEAR(Price(z0).bytes.dp, 2 * half0.bytes.dp, 1e3);
  const Prediction mixed = Price(OldChoice());
  EXPECT_GT(mixed.bytes.dp, half.bytes.dp);
  EXPECT_LT(mixed.bytes.dp, full.bytes.dp);
}

// The element-wise work of a layer under bf16: Loom's executor runs its LayerNorms, residual adds
// and GELU in fp32 as under fp32 and adds the casts for its GEMMs (both normed activations and
// the attention output forward, the attention output again backward: 6 bytes an element each;
// under ZeRO 3 the gathered weights too), less the 2 bytes an element that the GELU saves by
// writing its output, the FC projection's input, in bf16;
// Megatron-LM's all-bf16 tensors halve it. The GEMMs and attention priced from the same samples.
TEST(LayerCompute, LoomsBf16ElementwiseIsFp32PlusTheCasts) {
  PlanJob job = MegatronJob(8, 512, 2, 8, 1);
  job.dropout = false;
  Hardware hw;
  hw.type.fused_kernels = true;
  hw.memory_bandwidth = 10e9;
  hw.gemm = {{256, 256, 256, 1, 100e9}};
  hw.attention = {{128, 64, 1, 50e9}};
  Layout L;
  L.tp = 2;
  L.sp = true;
  auto fwd_bwd = [&](Precision p, bool megatron) {
    job.precision = p;
    job.mixed_precision_activations = megatron;
    const LayerCosts x = LayerCompute(job, hw, L, 2, Recompute::kNone);
    return std::pair{x.fwd, x.bwd};
  };
  const double tokens = 2.0 * job.seq, nh = tokens * 512;
  const double gelu_out = tokens * static_cast<double>(job.model.ffn()) / 2;
  const double casts = 6 * (2 * nh / 2 + nh / 2) - 2 * gelu_out;
  const auto [f32, b32] = fwd_bwd(Precision::kFp32, false);
  const auto [f16, b16] = fwd_bwd(Precision::kBf16, false);
  EXPECT_NEAR(f16 - f32, hw.MemoryTime(casts), 1e-12);
  EXPECT_NEAR(b16 - b32, hw.MemoryTime(6 * nh / 2), 1e-12);
  // Under ZeRO 3 the layer's weights are cast at each gather, forward and backward.
  L.zero = 3;
  const double w = hw.MemoryTime(6 * LayerParamsPerRank(job.model, 2));
  const auto [zf32, zb32] = fwd_bwd(Precision::kFp32, false);
  const auto [zf16, zb16] = fwd_bwd(Precision::kBf16, false);
  EXPECT_NEAR(zf16 - zf32, hw.MemoryTime(casts) + w, 1e-12);
  EXPECT_NEAR(zb16 - zb32, hw.MemoryTime(6 * nh / 2) + w, 1e-12);
  L.zero = 0;
  const auto [mf32, mb32] = fwd_bwd(Precision::kFp32, true);
  const auto [mf16, mb16] = fwd_bwd(Precision::kBf16, true);
  EXPECT_DOUBLE_EQ(mf32, f32);  // the same in fp32
  EXPECT_LT(mf16, mf32);        // halved element-wise bytes
  EXPECT_LT(mb16, mb32);
}

// Activations on the wire, likewise: Loom's executor sends the fp32 residual stream between
// stages (and the tied embedding's fp32 weights and gradient), passes fp32 K/V blocks around the
// ring and reduces fp32 outputs and input gradients over tp; only the sequence-parallel gathers
// travel in bf16. Megatron-LM (the published runs) carries all of them in bf16.
TEST_F(GptOnA100, LoomsBf16ActivationTrafficIsFp32ButForTheGathers) {
  const Candidate c = Make(2, 2, 4, 1, 1, 1, Recompute::kNone);
  const Prediction half = Price(c);
  job_.mixed_precision_activations = false;  // Loom's own: a job file
  job_.mixed_precision_states = false;       // (the tied embedding's copy: fp32 too)
  Rebuild();
  const Prediction loom = Price(c);
  EXPECT_NEAR(loom.bytes.pp, 2 * half.bytes.pp, 1e-6 * loom.bytes.pp);
  EXPECT_NEAR(loom.bytes.cp, 2 * half.bytes.cp, 1e-6 * loom.bytes.cp);
  // tp: per layer an all-gather (2 bytes either way) and a reduce-scatter (4 against 2), at the
  // edges reductions and gathers of 4 against 2: between 1.5 and 2 times.
  EXPECT_GT(loom.bytes.tp, 1.5 * half.bytes.tp);
  EXPECT_LT(loom.bytes.tp, 2 * half.bytes.tp);
  EXPECT_GE(loom.time.step, half.time.step);
}

// Sequence parallelism turns each tensor-parallel all-reduce into a reduce-scatter and an
// all-gather of the same ring bytes, in the layers and at the edges: the head gathers the final
// norm's output, the embedding its output gradient.
TEST_F(GptOnA100, SequenceParallelMovesTheBytesOfTheAllReduces) {
  Candidate c = Make(8, 1, 1, 1, 1, 1, Recompute::kNone);
  ASSERT_TRUE(c.layout.sp);
  const Prediction sp = Price(c);
  c.layout.sp = false;
  const Prediction all_reduce = Price(c);
  EXPECT_NEAR(sp.bytes.tp, all_reduce.bytes.tp, 1e-9 * all_reduce.bytes.tp);
}

TEST_F(GptOnA100, ShippedZero3BoundCapsEachRanksTransfers) {
  // The same layout with the file's ZeRO-3 bound (DeepSpeed's 2021 rate): its 871 GB per rank
  // can no longer ride the rings' 92.5 GB/s, and the step is at least their time at the bound.
  const Prediction rings = Price(OldChoice());
  cal_.zero3_rank_bandwidth =
      LoadShippedCalibration("dgx-a100.calibration.json").zero3_rank_bandwidth;
  Rebuild();
  const Prediction bound = Price(OldChoice());
  std::printf("tp 2 cp 2 dp 384 ZeRO 3: %.2f s at the rings, %.2f s at %.1f GB/s per rank\n",
              rings.time.step, bound.time.step, cal_.zero3_rank_bandwidth / 1e9);
  EXPECT_NEAR(bound.bytes.dp, rings.bytes.dp, 1);
  EXPECT_GE(bound.time.step, bound.bytes.dp / cal_.zero3_rank_bandwidth);
  EXPECT_LT(rings.time.step, 0.5 * bound.time.step);
}

TEST_F(GptOnA100, FirstGatherOfEveryChunkIsWaitedFor) {
  // One layer per chunk (pp 8, vpp 10): nothing can be prefetched, so every chunk's forward
  // waits for a whole gather and its backward for a gather and a reduce-scatter, although a
  // layer's compute (8 sequences) outlasts them.
  const Candidate c = Make(2, 4, 8, 10, 3, 8, Recompute::kNone);
  const ChunkCosts k = model_->Chunk(c);
  const GroupPath dp = paths_->Ring(2, 4 * c.layout.dp);
  const double w = LayerParamsPerRank(job_.model, 2) * 2;
  EXPECT_GE(k.f.zero, AllGather(dp, w));
  EXPECT_GE(k.b.zero, AllGather(dp, w) + ReduceScatter(dp, w));
  ASSERT_GT(k.f.compute, AllGather(dp, w));
  // With ten layers per chunk the gathers of nine of them hide behind their predecessors: the
  // chunk waits no longer than the one-layer chunk did.
  const ChunkCosts ten = model_->Chunk(Make(2, 4, 8, 1, 3, 8, Recompute::kNone));
  EXPECT_NEAR(ten.f.zero, k.f.zero, 1e-12);
  EXPECT_NEAR(ten.f.compute, 10 * k.f.compute, 1e-9);
}

TEST_F(GptOnA100, TransfersLongerThanComputeShow) {
  // A network ten times slower: each layer's gather (about 0.2 s) far outlasts the layer's
  // forward (28 ms), so the excess shows and the step is as long as the network is busy.
  cal_.inter.bandwidth = 18.5e9;
  Rebuild();
  const Candidate c = OldChoice();
  const ChunkCosts k = model_->Chunk(c);
  const GroupPath dp = paths_->Ring(2, 768);
  const double ag = AllGather(dp, LayerParamsPerRank(job_.model, 2) * 2);
  const double window = k.f.compute / 80 + k.f.tp / 80 + k.f.cp / 80;
  ASSERT_GT(ag, 5 * window);
  // First gather whole, the other 79 by their excess over the previous layer's forward.
  EXPECT_NEAR(k.f.zero, ag + 79 * (ag - window), 1e-6);
  const Prediction p = Price(c);
  EXPECT_GT(p.time.zero, 0.8 * p.time.step);
  EXPECT_GE(p.time.step, p.links.busy[kInterNode]);
}

TEST_F(GptOnA100, RingAttentionWaitsForTheGradientHops) {
  // worker/gpt.cc RingBackward sends the dK/dV accumulators after each block and waits at once:
  // cp hops per layer are exposed even when the attention would hide them.
  const Candidate c = Make(2, 4, 1, 1, 3, 1, Recompute::kNone);
  const ChunkCosts k = model_->Chunk(c);
  const GroupPath ring = paths_->Hop(2, 4);
  const double kv = 2.0 * 2048 / 4 * 12288 / 2 * 2;  // K and V of the local tokens, bf16
  EXPECT_GE(k.b.cp, 80 * 4 * PointToPoint(ring, kv));
  // Selective recompute rebuilds the attention core, and so runs the forward ring again.
  const ChunkCosts sel = model_->Chunk(Make(2, 4, 1, 1, 3, 1, Recompute::kSelective));
  EXPECT_NEAR(sel.b.cp - k.b.cp, k.f.cp, 1e-12);
  EXPECT_NEAR(sel.bytes.cp - k.bytes.cp, k.bytes.cp * 3 / 10, 1);  // 3 of 10 hops again
}

TEST_F(GptOnA100, DimensionsSharingTheNetworkAddUp) {
  // tp 8, cp 2: the context ring and the ZeRO-3 ring both cross the network from every node.
  const Prediction p = Price(Make(8, 2, 1, 1, 3, 4, Recompute::kSelective));
  EXPECT_GT(p.time.shared, 0);
  // With one member per node (tp 8) a ZeRO ring gets one NIC's share, 185 / 8 GB/s: the layout
  // is network-bound.
  EXPECT_DOUBLE_EQ(paths_->Ring(8, 192).bandwidth, 185e9 / 8);
  EXPECT_GT(p.links.busy[kInterNode], 0.95 * p.time.step);
}

TEST_F(GptOnA100, OverlappedTransfersSlowTheCompute) {
  const Prediction slowed = Price(OldChoice());
  cal_.overlap_slowdown = 0;
  Rebuild();
  const Prediction free = Price(OldChoice());
  EXPECT_EQ(free.time.slowdown, 0);
  // 15 % of compute speed lost during the ~13 s the gathers and reductions overlap it.
  const double overlapped = slowed.links.busy[kInterNode] - slowed.time.zero - slowed.time.dp;
  EXPECT_NEAR(slowed.time.slowdown, 0.15 * overlapped, 0.05 * 0.15 * overlapped);
  EXPECT_NEAR(slowed.time.step - free.time.step, slowed.time.slowdown, 1e-9);
}

TEST_F(GptOnA100, Zero2ReductionsPerMicroBatchAddUp) {
  // 48 micro-batches of one sequence, one layer per chunk: each chunk reduce-scatters its
  // layer's 1.8 GB gradient after every micro-batch, 960 times per step at 92.5 GB/s per rank;
  // the step cannot be shorter than that.
  const Candidate c = Make(2, 4, 4, 20, 2, 1, Recompute::kNone);
  const Prediction p = Price(c);
  const GroupPath dp = paths_->Ring(2, 4 * c.layout.dp);
  const double rs = ReduceScatter(dp, LayerParamsPerRank(job_.model, 2) * 2);
  EXPECT_GE(p.time.step, p.micro_batches * 20 * rs);
}

TEST(PlanChoice, NoPlanIsBusierOnALinkThanItsStep) {
  const Cluster a100 = LoadShippedCluster("dgx-a100.yaml");
  const Calibration cal = LoadShippedCalibration("dgx-a100.calibration.json");
  PlanJob job = MegatronJob(96, 12288, 80, 2304, 1536);
  job.selective_recompute = true;
  Result<SearchResult> r = SearchPlans(job, a100, cal, 5);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const Prediction& p : r->plans) {
    for (double busy : p.links.busy) EXPECT_LE(busy, p.time.step) << p.candidate.ToString();
  }
}

}  // namespace
}  // namespace loom
