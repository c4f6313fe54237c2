// `loom calibrate`: measures this machine for the planner and writes a calibration file
// (coordinator/calibration.h, docs/PLANNER.md):
//   - GEMM FLOP/s at the shapes the job's model uses (core/kernels/blas.h ParallelGemm: the
//     forward and both backward GEMMs of every linear layer and of the head), for the
//     tensor-parallel splits and micro-batches the planner may choose;
//   - fused attention FLOP/s (core/kernels/attention.h, forward + backward);
//   - memory-bound kernel throughput (LayerNorm, GELU, residual adds) and the fixed cost of one
//     kernel;
//   - under mpirun: all-reduce, all-gather, reduce-scatter and send/recv latency and bandwidth for
//     groups of 2..N ranks (comm/communicator.h), fitted into the intra-node link's alpha-beta.
// Every rank measures compute at the same time with cores / ranks threads, as `loom train` runs;
// so calibrating once alone and once under `mpirun -np N` (with --merge) gives samples for both
// thread counts.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "comm/mpi/mpi_runtime.h"
#include "coordinator/calibration.h"
#include "coordinator/plan_job.h"
#include "core/file_util.h"
#include "core/kernels/attention.h"
#include "core/kernels/blas.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/layernorm.h"
#include "core/threads.h"

namespace loom {
namespace {

struct CalibrateOptions {
  std::string job, output = "calibration.json", merge;
  double seconds = 0.2;  // minimum measuring time per sample
  int64_t max_bytes = 64 << 20;
};

bool UnderMpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_RANK");
}

// Median (or fastest) seconds per call of `fn` over at least `min_seconds` and 3 calls, after
// one warm-up. Kernels are timed by their fastest call: other processes on the machine only ever
// slow a call down.
double TimeIt(const std::function<void()>& fn, double min_seconds, bool min = false) {
  using C = std::chrono::steady_clock;
  fn();
  std::vector<double> t;
  const auto start = C::now();
  while (t.size() < 3 || std::chrono::duration<double>(C::now() - start).count() < min_seconds) {
    const auto a = C::now();
    fn();
    t.push_back(std::chrono::duration<double>(C::now() - a).count());
    if (t.size() >= 1000) break;
  }
  std::sort(t.begin(), t.end());
  return min ? t.front() : t[t.size() / 2];
}

struct Shape {
  int64_t m, n, k;
};

// GEMM shapes of the job's linear layers and head for tensor-parallel splits up to `max_tp` and
// a few micro-batch sizes; a default ladder without a job.
std::vector<Shape> GemmShapes(const PlanJob* job, int max_tp) {
  std::vector<Shape> out;
  if (job == nullptr) {
    for (int64_t s : {256, 512, 1024, 2048}) out.push_back({s, s, s});
    return out;
  }
  const int64_t h = job->model.hidden, v = job->model.vocab;
  for (int tp = 1; tp <= max_tp; tp *= 2) {
    if (job->model.heads % tp != 0) continue;
    for (int64_t mb = 1; mb <= std::min<int64_t>(job->global_batch, 16); mb *= 2) {
      const int64_t m = mb * job->seq;
      if (m > 16384) break;
      for (Shape s : {Shape{m, 3 * h / tp, h}, Shape{m, h, h / tp}, Shape{m, 4 * h / tp, h},
                      Shape{m, h, 4 * h / tp}, Shape{m, (v + tp - 1) / tp, h}}) {
        out.push_back(s);
      }
    }
  }
  return out;
}

void MeasureCompute(const PlanJob* job, int threads, int max_tp, double secs, Calibration* cal) {
  const std::vector<Shape> shapes = GemmShapes(job, max_tp);
  for (const Shape& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.m * s.k), 0.01f);
    std::vector<float> b(static_cast<size_t>(s.n * s.k), 0.02f);
    std::vector<float> c(static_cast<size_t>(s.m * s.n), 0.03f);
    std::vector<float> da(a.size()), db(b.size());
    // A linear layer's three GEMMs: Y = X W^T, dX = dY W, dW = dY^T X. The sample is their joint
    // rate, which prices the planner's forward (one GEMM) and backward (two) together.
    const double t = TimeIt(
        [&] {
          ParallelGemm<float>(false, true, s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.k, 0.0f,
                              c.data(), s.n);
          ParallelGemm<float>(false, false, s.m, s.k, s.n, 1.0f, c.data(), s.n, b.data(), s.k, 0.0f,
                              da.data(), s.k);
          ParallelGemm<float>(true, false, s.n, s.k, s.m, 1.0f, c.data(), s.n, a.data(), s.k, 1.0f,
                              db.data(), s.k);
        },
        secs, /*min=*/true);
    cal->gemm.push_back({static_cast<double>(s.m), static_cast<double>(s.n),
                         static_cast<double>(s.k), threads, 3 * 2.0 * s.m * s.n * s.k / t});
  }
  if (job != nullptr) {
    for (int tp = 1; tp <= max_tp; tp *= 2) {
      if (job->model.heads % tp != 0) continue;
      AttentionShape sh;
      sh.batch = 1;
      sh.seq = job->seq;
      sh.heads = job->model.heads / tp;
      sh.head_dim = job->model.head_dim();
      const int64_t c = sh.heads * sh.head_dim, n = sh.seq * c;
      std::vector<float> qkv(static_cast<size_t>(3 * n), 0.01f), out(static_cast<size_t>(n));
      std::vector<float> lse(static_cast<size_t>(sh.heads * sh.seq)), dqkv(qkv.size());
      std::vector<float> dout(static_cast<size_t>(n), 0.01f);
      const double t = TimeIt(
          [&] {
            AttentionForward<float>(out.data(), lse.data(), qkv.data(), sh);
            AttentionBackward<float>(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(),
                                     sh);
          },
          secs, /*min=*/true);
      // Full-square forward FLOPs (QK^T and PV), times 3 for forward + backward.
      const double flops = 3 * 4.0 * sh.heads * sh.seq * sh.seq * sh.head_dim;
      cal->attention.push_back(
          {static_cast<double>(sh.seq), static_cast<double>(sh.head_dim), threads, flops / t});
    }
  }
  // Memory-bound kernels, priced by the planner as bytes over bandwidth: one layer's mix of a
  // LayerNorm (read + write), GELU over the 4h-wide activation and two residual adds (read two,
  // write one), i.e. 16 elements moved per token and hidden unit.
  const int64_t c = job != nullptr ? job->model.hidden : 1024;
  const int64_t n = std::max<int64_t>(1, (int64_t{1} << 22) / c);  // 16 MiB per [n, c] tensor
  std::vector<float> x(static_cast<size_t>(n * c), 0.5f), y(x.size()), wide(x.size() * 4, 0.1f);
  std::vector<float> wide_out(wide.size()), mean(static_cast<size_t>(n)), rstd(mean.size());
  std::vector<float> w(static_cast<size_t>(c), 1.0f), bias(static_cast<size_t>(c), 0.0f);
  const double t = TimeIt(
      [&] {
        LayerNormForward<float>(y.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(),
                                n, c);
        GeluForward<float>(wide_out.data(), wide.data(), 4 * n * c);
        ResidualForward<float>(y.data(), y.data(), x.data(), n * c);
        ResidualForward<float>(y.data(), y.data(), x.data(), n * c);
      },
      secs, /*min=*/true);
  cal->memory.push_back({threads, 16.0 * 4 * n * c / t});
  // Fixed cost of one kernel: the same LayerNorm on a single row (the fastest call: the cost of
  // waking the thread pool, not of waiting for a busy core).
  cal->op_overhead = TimeIt(
      [&] {
        LayerNormForward<float>(y.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(),
                                1, c);
      },
      secs / 4, /*min=*/true);
}

Status MeasureComm(MpiRuntime& mpi, const CalibrateOptions& o, Calibration* cal) {
  const int world = mpi.world_size(), rank = mpi.world_rank();
  std::vector<std::pair<double, double>> pair_allreduce;
  for (int g = 2; g <= world; ++g) {
    std::vector<int> members;
    for (int r = 0; r < g; ++r) members.push_back(r);
    std::unique_ptr<Communicator> comm;
    if (rank < g) {
      LOOM_ASSIGN_OR_RETURN(comm, mpi.CreateGroup("calib" + std::to_string(g), members));
    }
    for (int64_t bytes = 4096; bytes <= o.max_bytes; bytes *= 8) {
      const int64_t n = bytes / 4 / g * g;
      std::vector<float> buf(static_cast<size_t>(n), 1.0f), out(static_cast<size_t>(n));
      struct Op {
        const char* name;
        std::function<Status()> run;
      };
      // Appended one by one: an initializer list of std::function trips a GCC 12 false
      // positive (-Wfree-nonheap-object).
      std::vector<Op> ops;
      ops.push_back({"all_reduce", [&] { return comm->AllReduce(buf.data(), n); }});
      ops.push_back({"all_gather", [&] { return comm->AllGather(buf.data(), out.data(), n / g); }});
      ops.push_back(
          {"reduce_scatter", [&] { return comm->ReduceScatter(buf.data(), out.data(), n / g); }});
      if (g == 2) {
        ops.push_back({"send_recv", [&] {
                         return comm->rank() == 0 ? comm->Send(buf.data(), n, 1)
                                                  : comm->Recv(buf.data(), n, 0);
                       }});
      }
      for (const Op& op : ops) {
        if (rank >= g) continue;
        Status st;
        // Every member runs the same number of calls: a fixed count, not a time budget.
        const int reps = bytes >= (8 << 20) ? 5 : 20;
        LOOM_RETURN_IF_ERROR(comm->Barrier());
        const double t = TimeIt(
                             [&] {
                               for (int i = 0; i < reps && st.ok(); ++i) st = op.run();
                             },
                             0) /
                         reps;
        LOOM_RETURN_IF_ERROR(st);
        cal->collectives.push_back({op.name, g, static_cast<double>(n * 4), t});
        if (g == 2 && std::string(op.name) == "all_reduce") {
          pair_allreduce.push_back({static_cast<double>(n * 4), t});
        }
      }
    }
  }
  if (pair_allreduce.size() >= 2) {
    // Two-rank ring all-reduce: t = 2 alpha + S / bandwidth. Alpha from the smallest message,
    // bandwidth from the largest (a least-squares line lets the large ones swamp alpha).
    const auto [s0, t0] = pair_allreduce.front();
    const auto [s1, t1] = pair_allreduce.back();
    const double bw = (s1 - s0) / std::max(t1 - t0, 1e-12);
    cal->intra.latency = std::max(0.0, (t0 - s0 / bw) / 2);
    cal->intra.bandwidth = bw;
  }
  return Status::Ok();
}

std::string Source(int world, int threads) {
  char host[256] = "unknown";
  gethostname(host, sizeof(host) - 1);
  std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M", std::localtime(&now));
  return std::string("loom calibrate on ") + host + " at " + date + ", " + std::to_string(world) +
         " rank(s) x " + std::to_string(threads) + " thread(s)";
}

// Adds `fresh` to `base`: samples appended, measured figures replaced.
void Merge(const Calibration& fresh, Calibration* base) {
  base->source += "; " + fresh.source;
  base->has_precision = true;
  base->precision = fresh.precision;
  for (const GemmSample& s : fresh.gemm) base->gemm.push_back(s);
  for (const AttentionSample& s : fresh.attention) base->attention.push_back(s);
  for (const CollectiveSample& s : fresh.collectives) base->collectives.push_back(s);
  for (const MemorySample& s : fresh.memory) base->memory.push_back(s);
  base->op_overhead = std::min(base->op_overhead, fresh.op_overhead);
  if (fresh.intra.bandwidth > 0) base->intra = fresh.intra;
}

Status RunCalibrate(const CalibrateOptions& o, std::unique_ptr<MpiRuntime>* mpi) {
  std::unique_ptr<PlanJob> job;
  if (!o.job.empty()) {
    LOOM_ASSIGN_OR_RETURN(PlanJob j, LoadPlanJob(o.job));
    job = std::make_unique<PlanJob>(j);
  }
  int world = 1, rank = 0, local = 1;
  if (UnderMpirun()) {
    int argc = 0;
    char** argv = nullptr;
    LOOM_ASSIGN_OR_RETURN(*mpi, MpiRuntime::Init(&argc, &argv));
    world = (*mpi)->world_size();
    rank = (*mpi)->world_rank();
    local = (*mpi)->local_size();
  }
  const int threads = DefaultThreads(local);
  ConfigureThreads(threads);
  const int cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  Calibration cal;
  cal.source = Source(world, threads);
  cal.has_precision = true;
  cal.precision = Precision::kFp32;
  if (rank == 0) {
    std::fprintf(stderr, "loom calibrate: %d rank(s) x %d thread(s): GEMMs, attention, memory\n",
                 world, threads);
  }
  MeasureCompute(job.get(), threads, std::max(world, cores), o.seconds, &cal);
  if (world > 1) {
    if (rank == 0) std::fprintf(stderr, "loom calibrate: collectives over 2..%d ranks\n", world);
    LOOM_RETURN_IF_ERROR(MeasureComm(**mpi, o, &cal));
  }
  if (rank != 0) return Status::Ok();
  std::string output = o.output;
  if (!o.merge.empty()) {
    LOOM_ASSIGN_OR_RETURN(Calibration base, LoadCalibration(o.merge));
    Merge(cal, &base);
    cal = base;
    if (output == "calibration.json") output = o.merge;
  }
  LOOM_RETURN_IF_ERROR(WriteFileAtomic(output, CalibrationToJson(cal)));
  std::printf(
      "wrote %s: %zu GEMM, %zu attention, %zu collective samples; memory-bound kernels %.1f "
      "GB/s per rank, %.1f us per kernel",
      output.c_str(), cal.gemm.size(), cal.attention.size(), cal.collectives.size(),
      cal.memory.back().bandwidth / 1e9, cal.op_overhead * 1e6);
  if (cal.intra.bandwidth > 0) {
    std::printf("; link %.2f GB/s, %.1f us", cal.intra.bandwidth / 1e9, cal.intra.latency * 1e6);
  }
  std::printf("\n");
  return Status::Ok();
}

}  // namespace

void AddCalibrateCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand("calibrate", "Measure this machine for the planner");
  cmd->add_option("--job", o->job, "Job file: measure the GEMM shapes of its model");
  cmd->add_option("--output", o->output, "Calibration file to write (JSON)");
  cmd->add_option("--merge", o->merge, "Add the measurements to this calibration file");
  cmd->add_option("--seconds", o->seconds, "Minimum measuring time per sample")
      ->check(CLI::Range(0.01, 60.0));
  cmd->add_option("--max-bytes", o->max_bytes, "Largest collective message")
      ->check(CLI::Range(int64_t{4096}, int64_t{1} << 32));
  cmd->callback([o, exit_code] {
    std::unique_ptr<MpiRuntime> mpi;
    Status st = RunCalibrate(*o, &mpi);
    *exit_code = st.ok() ? 0 : ReportError("calibrate", st);
  });
}

}  // namespace loom
