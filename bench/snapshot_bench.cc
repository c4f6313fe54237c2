// In-memory snapshots, measured in one run (mpirun -np 2; docs/SNAPSHOTS.md, docs/BENCHMARKS.md):
//   overhead  median step time of the benchmark model of train_step_bench (4 layers x 256 hidden,
//             seq 256, batch 8), dp = 2 with ZeRO-1, one rank per core, without snapshots, with
//             one every step (K = 1) and every 4 steps (K = 4), RS(1,1) across the two ranks as
//             two logical nodes; rounds interleaved. Says what part of a save is copy, encode,
//             transfer, and how long the step loop waited.
//   encode    RS(2,1) and RS(4,2) over 64 MiB on one core: ReedSolomon::Encode against raw
//             ec_encode_data on the same buffers and tables, and the whole encode step of a
//             snapshot (digests of the pieces and the parities around it).
//   decode    rebuilding one lost data piece, GB/s of rebuilt data.
//   transfer  one-sided bulk puts of 64 MiB from rank 0 into rank 1's window, UCX and the
//             communicator fallback (bench/snapshot_bench.sh puts ucx_perftest beside it).
// Last line:
//   overhead_k1=... overhead_k4=... encode_gbs=... raw_encode_gbs=... ec_vs_raw=...
//   encode_step_vs_raw=... decode_gbs=... put_ucx_gbs=... put_comm_gbs=...
#include <isa-l/erasure_code.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "comm/backend.h"
#include "comm/bulk_transport.h"
#include "core/crc32c.h"
#include "core/threads.h"
#include "fault/erasure/reed_solomon.h"
#include "parallel/process_groups.h"
#include "worker/trainer.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs one trainer with snapshots and interleaves three settings in blocks of kBlock steps —
// none, one every step (K = 1), one every 4 steps (K = 4) — so that all three see the same drift
// of this VM's speed (it moves by tens of percent over tens of seconds: separate runs per setting
// measured the drift). The first step of a block is not counted (it absorbs the last save of the
// block before); the others carry exactly their own block's saves (a save is copied during the
// next step, and K = 4 saves on a block's first step only).
constexpr int kBlock = 5;
enum Setting { kNone = 0, kK1 = 1, kK4 = 2 };

class Interleave : public loom::StepObserver {
 public:
  Interleave(loom::Snapshotter* snap, int warmup) : snap_(snap), warmup_(warmup) {}
  loom::Status OnStep(const loom::StepEvent& e) override {  // before the snapshotter's
    if (e.step > warmup_) {
      const int64_t i = e.step - warmup_ - 1;  // 0-based after the warm-up
      const int pos = static_cast<int>(i % kBlock);
      const Setting now = static_cast<Setting>(i / kBlock % 3);
      if (pos > 0) ms[now].push_back(e.step_s * 1e3);
      // This step's save (the snapshotter observes after this): K=1 every step, K=4 the first.
      snap_->set_every(now == kK1 || (now == kK4 && pos == 0) ? 1 : 0);
    } else {
      snap_->set_every(0);
    }
    return loom::Status::Ok();
  }
  std::vector<double> ms[3];

 private:
  loom::Snapshotter* snap_;
  int warmup_;
};

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// GB/s of `fn` over `bytes`, best of `reps`.
template <typename Fn>
double Rate(uint64_t bytes, int reps, Fn fn) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, Since(t0));
  }
  return static_cast<double>(bytes) / best / 1e9;
}

struct EcResult {
  double ours = 0, raw = 0, step = 0, decode = 0;
};

EcResult MeasureEc(int k, int m, uint64_t total) {
  const uint64_t piece = total / k;
  std::vector<std::vector<uint8_t>> data(k, std::vector<uint8_t>(piece)),
      parity(m, std::vector<uint8_t>(piece));
  for (int i = 0; i < k; ++i) {
    for (uint64_t j = 0; j < piece; ++j) data[i][j] = static_cast<uint8_t>(j * 7 + i);
  }
  std::vector<const uint8_t*> d;
  std::vector<uint8_t*> p;
  for (auto& v : data) d.push_back(v.data());
  for (auto& v : parity) p.push_back(v.data());
  loom::Result<loom::ReedSolomon> rs = loom::ReedSolomon::Create(k, m);
  EcResult out;
  out.ours = Rate(total, 5, [&] { rs->Encode(piece, d.data(), p.data()); });
  // Raw ISA-L on the same buffers, with the same (Cauchy) coefficients.
  std::vector<uint8_t> matrix((k + m) * k), tables(32 * k * m);
  gf_gen_cauchy1_matrix(matrix.data(), k + m, k);
  ec_init_tables(k, m, matrix.data() + k * k, tables.data());
  std::vector<uint8_t*> dd(d.size());
  for (int i = 0; i < k; ++i) dd[i] = data[i].data();
  out.raw = Rate(total, 5, [&] {
    ec_encode_data(static_cast<int>(piece), k, m, tables.data(), dd.data(), p.data());
  });
  // A snapshot's encode step: the pieces' digests checked, encoded, the parities' digests.
  out.step = Rate(total, 5, [&] {
    uint32_t sink = 0;
    for (int i = 0; i < k; ++i) sink ^= loom::Crc32c(d[i], piece);
    rs->Encode(piece, d.data(), p.data());
    for (int i = 0; i < m; ++i) sink ^= loom::Crc32c(p[i], piece);
    if (sink == 0x12345678) std::printf(" ");
  });
  // Rebuilding data piece 0 from the others and the first parity.
  std::vector<const uint8_t*> present(k + m, nullptr);
  for (int i = 1; i < k; ++i) present[i] = d[i];
  present[k] = p[0];
  std::vector<uint8_t> rebuilt(piece);
  uint8_t* out_ptr = rebuilt.data();
  out.decode = Rate(piece, 5, [&] { (void)rs->Decode(piece, present, {0}, &out_ptr); });
  if (std::memcmp(rebuilt.data(), data[0].data(), piece) != 0) out.decode = -1;
  return out;
}

// GB/s of puts of `bytes` from rank 0 into rank 1's window.
double MeasurePut(loom::BulkKind kind, loom::Communicator* world, uint64_t bytes,
                  const char** name) {
  std::vector<char> window(bytes), src(bytes, 7);
  auto t = loom::CreateBulkTransport(kind, world, {{window.data(), bytes}});
  if (!t.ok()) return 0;
  *name = (*t)->name();
  std::vector<double> secs;
  for (uint64_t round = 0; round < 8; ++round) {
    std::vector<loom::BulkSend> sends;
    std::vector<loom::BulkRecv> recvs;
    if (world->rank() == 0) sends.push_back({1, 0, 0, src.data(), bytes, "x"});
    if (world->rank() == 1) recvs.push_back({0, 0, 0, bytes, ""});
    (void)world->Barrier();
    const auto t0 = Clock::now();
    loom::Status st = (*t)->Exchange(round, sends, &recvs, Clock::now() + std::chrono::seconds(30));
    if (!st.ok()) return 0;
    secs.push_back(Since(t0));
    (void)world->Barrier();  // the window is reused by the next round
  }
  return static_cast<double>(bytes) / Median(secs) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  auto rt = loom::CreateBackend(loom::BackendKind::kMpi, {.argc = &argc, .argv = &argv});
  if (!rt.ok() || (*rt)->world_size() != 2) {
    std::fprintf(stderr, "snapshot_bench: run with mpirun -np 2\n");
    return 1;
  }
  int cycles = 16, m = 1;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--cycles") == 0) cycles = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--m") == 0) m = std::atoi(argv[i + 1]);  // 0: node-local only
  }
  const bool root = (*rt)->world_rank() == 0;
  loom::ConfigureThreads(1);  // one core per rank
  auto place = loom::ProcessGroups::Create(**rt, loom::Layout{.dp = 2, .zero = 1});
  if (!place.ok()) return 1;
  loom::JobConfig job;
  job.path = "snapshot_bench";
  job.model = {256, 256, 4, 8, 256};  // train_step_bench's model
  job.data.text = LOOM_SOURCE_DIR "/data/tinyshakespeare.txt";
  job.data.val_fraction = 0;
  job.data.seq = 256;
  job.data.global_batch = 8;
  job.data.micro_batch = 4;
  job.optim.lr = 1e-4;
  job.eval.every = 0;
  job.sample.tokens = 0;
  const int warmup = 3;
  job.steps = warmup + cycles * 3 * kBlock + 1;
  loom::SnapshotSetup setup;
  setup.plan.set_every(1);
  setup.plan.set_k(1);
  setup.plan.set_m(m);
  setup.plan.set_job_key("bench" + std::to_string(::getppid()));
  setup.plan.add_rank_node("b0");
  setup.plan.add_rank_node("b1");
  if (m > 0) {
    loom::proto::StripeGroupSpec* g = setup.plan.add_groups();
    g->add_ranks(0);
    g->add_ranks(1);
  }
  setup.backend = rt->get();
  auto trainer = loom::Trainer::Create(job, *place, &setup);
  if (!trainer.ok()) {
    std::fprintf(stderr, "snapshot_bench: %s\n", trainer.status().ToString().c_str());
    return 1;
  }
  Interleave inter((*trainer)->snapshotter(), warmup);
  loom::Result<loom::TrainSummary> run = (*trainer)->Run({&inter, (*trainer)->snapshotter()});
  if (!run.ok()) {
    std::fprintf(stderr, "snapshot_bench: %s\n", run.status().ToString().c_str());
    return 1;
  }
  const loom::SaveStats save = (*trainer)->snapshotter()->stats();
  const loom::ReplicatorStats rep = (*trainer)->snapshotter()->replication();
  const double m0 = Mean(inter.ms[kNone]), m1 = Mean(inter.ms[kK1]), m4 = Mean(inter.ms[kK4]);
  // Erasure coding and transfer.
  EcResult ec21, ec42;
  if (root) {
    ec21 = MeasureEc(2, 1, 64ull << 20);
    ec42 = MeasureEc(4, 2, 64ull << 20);
  }
  const char* ucx_name = "none";
  const char* comm_name = "comm";
  const double put_ucx =
      MeasurePut(loom::BulkKind::kUcx, place->world.get(), 64ull << 20, &ucx_name);
  const double put_comm =
      MeasurePut(loom::BulkKind::kComm, place->world.get(), 64ull << 20, &comm_name);
  if (root) {
    std::printf(
        "model 4 layers x 256 hidden, seq 256, batch 8 (micro 4), dp=2 zero=1, 1 thread "
        "per rank, 2 ranks on 2 cores as 2 logical nodes, %s; settings interleaved in "
        "blocks of %d steps, %d cycles\n",
        m > 0 ? "RS(1,1)" : "node-local", kBlock, cycles);
    const double saves = std::max(1, save.saves);
    std::printf("no snapshots   %7.1f ms/step (mean of %zu steps)\n", m0, inter.ms[kNone].size());
    std::printf("snapshots K=1  %7.1f ms/step (%+5.1f%%)\n", m1, 100 * (m1 / m0 - 1));
    std::printf("snapshots K=4  %7.1f ms/step (%+5.1f%%)\n", m4, 100 * (m4 / m0 - 1));
    std::printf(
        "per save (%d saves, %.1f MB per rank): writer thread copy+digests %.1f ms, encode "
        "%.1f ms, transfer %.1f ms (waiting for the peer included); the step loop "
        "waited %.2f ms\n",
        save.saves, save.bytes / saves / 1e6, 1e3 * save.write_s / saves,
        1e3 * rep.encode_s / saves, 1e3 * rep.transfer_s / saves, 1e3 * save.stall_s / saves);
    std::printf(
        "RS(2,1) 64 MiB: encode %.1f GB/s, raw ec_encode_data %.1f GB/s (%.2fx); encode "
        "step with digests %.1f GB/s; decode %.1f GB/s\n",
        ec21.ours, ec21.raw, ec21.ours / ec21.raw, ec21.step, ec21.decode);
    std::printf(
        "RS(4,2) 64 MiB: encode %.1f GB/s, raw ec_encode_data %.1f GB/s (%.2fx); encode "
        "step with digests %.1f GB/s; decode %.1f GB/s\n",
        ec42.ours, ec42.raw, ec42.ours / ec42.raw, ec42.step, ec42.decode);
    std::printf("bulk put 64 MiB rank 0 -> 1: %s %.2f GB/s, %s %.2f GB/s\n", ucx_name, put_ucx,
                comm_name, put_comm);
    // The upper bound by accounting: every ms of the writer's work taken from compute (the two
    // cores run both ranks' training), plus the step loop's own waits.
    const double cost1 =
        (save.write_s + rep.encode_s + rep.transfer_s + save.stall_s) / saves * 1e3 / m0;
    std::printf("accounting: a save costs at most %.1f%% of a step (K=1), %.1f%% per step at K=4\n",
                100 * cost1, 100 * cost1 / 4);
    std::printf(
        "overhead_k1=%.4f overhead_k4=%.4f cost_k1=%.4f cost_k4=%.4f encode_gbs=%.2f "
        "raw_encode_gbs=%.2f ec_vs_raw=%.3f encode_step_vs_raw=%.3f decode_gbs=%.2f "
        "put_ucx_gbs=%.2f put_comm_gbs=%.2f\n",
        m1 / m0 - 1, m4 / m0 - 1, cost1, cost1 / 4, ec42.ours, ec42.raw, ec42.ours / ec42.raw,
        ec42.step / ec42.raw, ec42.decode, put_ucx, put_comm);
  }
  return 0;
}
