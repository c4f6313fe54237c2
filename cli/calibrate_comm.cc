// Communication measurements of `loom calibrate` (see calibrate_measure.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/calibrate_measure.h"
#include "coordinator/planner/model_math.h"
#include "core/kernels/blas.h"

namespace loom {
namespace {

// Each member sends `n` floats to the next rank and receives `n` from the previous one.
Status Exchange(Communicator& comm, const float* send, float* recv, int64_t n) {
  const int g = comm.size(), r = comm.rank();
  HandlePtr in = comm.RecvAsync(recv, n, (r + g - 1) % g, 7);
  HandlePtr out = comm.SendAsync(send, n, (r + 1) % g, 7);
  LOOM_RETURN_IF_ERROR(out->Wait(comm.DefaultDeadline()));
  return in->Wait(comm.DefaultDeadline());
}

// Median seconds of `fn` over `reps` calls, every member starting each call together.
Result<double> TimeTogether(Communicator& comm, int reps, const std::function<Status()>& fn) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    LOOM_RETURN_IF_ERROR(comm.Barrier());
    const auto a = std::chrono::steady_clock::now();
    LOOM_RETURN_IF_ERROR(fn());
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// One MLP matrix of the job (h x 4h, over up to 2,048 tokens; 1,024 and 1,024 without a job),
// its operands rotated through kCalibrationCopies: the compute the overlap and synchronisation
// measurements run between transfers.
class MlpMatrix {
 public:
  explicit MlpMatrix(const PlanJob* job)
      : h_(job != nullptr ? job->model.hidden : 1024),
        m_(job != nullptr ? std::min<int64_t>(job->seq * 4, 2048) : 1024),
        x_(SpreadCopies(m_ * h_, 0.01f)),
        w_(SpreadCopies(4 * h_ * h_, 0.02f)),
        y_(SpreadCopies(m_ * 4 * h_, 0)),
        dx_(SpreadCopies(m_ * h_, 0)),
        dw_(SpreadCopies(4 * h_ * h_, 0)) {}

  // The forward GEMM (about the span between two tensor-parallel collectives).
  void Forward() { Forward(Next()); }
  double ForwardFlops() const { return 2.0 * static_cast<double>(m_ * 4 * h_ * h_); }
  // Forward and backward (input and weight gradients).
  void Layer() {
    const size_t j = Next();
    Forward(j);
    ParallelGemm<float>(false, false, m_, h_, 4 * h_, 1.0f, y_[j].data(), 4 * h_, w_[j].data(), h_,
                        0.0f, dx_[j].data(), h_);
    ParallelGemm<float>(true, false, 4 * h_, h_, m_, 1.0f, y_[j].data(), 4 * h_, x_[j].data(), h_,
                        1.0f, dw_[j].data(), h_);
  }

 private:
  size_t Next() { return static_cast<size_t>(calls_++ % kCalibrationCopies); }
  void Forward(size_t j) {
    ParallelGemm<float>(false, true, m_, 4 * h_, h_, 1.0f, x_[j].data(), h_, w_[j].data(), h_, 0.0f,
                        y_[j].data(), 4 * h_);
  }

  const int64_t h_, m_;
  std::vector<std::vector<float>> x_, w_, y_, dx_, dw_;
  int calls_ = 0;
};

// What a transfer running alongside compute costs the compute: the planner's overlap_slowdown,
// compute seconds lost per second of transfer (the transfer's time alone) overlapping it. On
// CPU ranks no NIC or copy engine moves the bytes: the communication thread and MPI's
// shared-memory copies and reductions run on the cores the compute threads use, and a transfer
// that needs both ranks' communication threads to run at once advances only when the scheduler
// happens to run them together — so the loss can exceed the transfer's own time.
// Each member alternates a compute loop alone (t_c) with the same loop with a transfer issued
// just before it and waited for after it (t_both), in both orders; loss = mean(t_both - t_c) /
// t_m (the transfer alone), averaged over the group's members, for the transfers the runtime
// overlaps: all-gather and reduce-scatter (ZeRO), all-reduce (data parallelism), send/recv (ring
// attention, pipeline) of one layer's parameters (the job's ZeRO and data-parallel bucket; 4 MiB
// without a job). The figure is the mean of the middle two of the four.
// The mean, not the median: a step pays the average loss, and where ranks share cores the loss
// comes in scheduler time slices, now and then and large; the median of nine repetitions saw
// them or not, and four launches' calibrations a few minutes apart measured 0.12 to 3.1 where
// the runs themselves matched about 3 (docs/BENCHMARKS.md). kOverlapReps pairs, the most extreme
// tenth at either end left out (another process's burst, not the transfer's cost).
constexpr int kOverlapReps = 12, kOverlapBuckets = 8;

Result<double> MeasureOverlap(Communicator& comm, const PlanJob* job) {
  MlpMatrix mlp(job);
  const int g = comm.size(), r = comm.rank();
  const double layer_bytes = job != nullptr ? 4 * LayerParams(job->model) : 4 << 20;
  const int64_t n = static_cast<int64_t>(layer_bytes / 4) / g * g;
  std::vector<float> buf(static_cast<size_t>(n), 1.0f), out(static_cast<size_t>(n));
  KeepIfAbandoned keep(&comm);  // a late peer may still write them after a timeout
  keep(buf);
  keep(out);
  HandlePtr recv;  // send/recv: the receive of the exchange
  auto wait = [&](const HandlePtr& hd) -> Status {
    LOOM_RETURN_IF_ERROR(hd->Wait(comm.DefaultDeadline()));
    if (!recv) return Status::Ok();
    HandlePtr in = std::move(recv);
    return in->Wait(comm.DefaultDeadline());
  };
  std::vector<std::function<HandlePtr()>> ops;
  ops.push_back([&] { return comm.AllGatherAsync(buf.data(), out.data(), n / g); });
  ops.push_back([&] { return comm.ReduceScatterAsync(buf.data(), out.data(), n / g); });
  ops.push_back([&] { return comm.AllReduceAsync(buf.data(), n, ReduceOp::kSum); });
  ops.push_back([&] {
    recv = comm.RecvAsync(out.data(), n, (r + g - 1) % g, 9);
    return comm.SendAsync(buf.data(), n, (r + 1) % g, 9);
  });
  std::vector<double> loss;
  for (const auto& op : ops) {
    LOOM_ASSIGN_OR_RETURN(double t_m, TimeTogether(comm, 9, [&] { return wait(op()); }));
    // Enough compute to hide the transfer three times over.
    LOOM_ASSIGN_OR_RETURN(double t_layer, TimeTogether(comm, 3, [&] {
                            mlp.Layer();
                            return Status::Ok();
                          }));
    const int layers = std::max(1, static_cast<int>(std::ceil(3 * t_m / t_layer)));
    // kOverlapBuckets transfers in a row, each beside its compute (as a backward reduces one
    // bucket per layer): a window of many scheduler time slices rather than one or two.
    auto alone = [&] {
      return TimeTogether(comm, 1, [&] {
        for (int i = 0; i < kOverlapBuckets * layers; ++i) mlp.Layer();
        return Status::Ok();
      });
    };
    auto both = [&] {
      return TimeTogether(comm, 1, [&]() -> Status {
        for (int b = 0; b < kOverlapBuckets; ++b) {
          HandlePtr hd = op();
          for (int i = 0; i < layers; ++i) mlp.Layer();
          LOOM_RETURN_IF_ERROR(wait(hd));
        }
        return Status::Ok();
      });
    };
    std::vector<double> extra;
    for (int rep = 0; rep < kOverlapReps; ++rep) {
      // Alternating which runs first, so that a drift of the machine's speed cancels.
      double t_c = 0, t_both = 0;
      if (rep % 2 == 0) {
        LOOM_ASSIGN_OR_RETURN(t_c, alone());
        LOOM_ASSIGN_OR_RETURN(t_both, both());
      } else {
        LOOM_ASSIGN_OR_RETURN(t_both, both());
        LOOM_ASSIGN_OR_RETURN(t_c, alone());
      }
      extra.push_back(t_both - t_c);
    }
    std::sort(extra.begin(), extra.end());
    const size_t cut = extra.size() / 10;
    double sum = 0;
    for (size_t i = cut; i < extra.size() - cut; ++i) sum += extra[i];
    float mean = static_cast<float>(sum / static_cast<double>(extra.size() - 2 * cut));
    // Every member's figure, averaged: each saw the transfer from its own core.
    LOOM_RETURN_IF_ERROR(comm.AllReduce(&mean, 1));
    loss.push_back(std::max(0.0, static_cast<double>(mean) / g) / (kOverlapBuckets * t_m));
  }
  std::sort(loss.begin(), loss.end());
  return std::min(kMaxOverlapSlowdown, (loss[1] + loss[2]) / 2);
}

constexpr int64_t kSyncWaitBytes[] = {4096, 128 << 10, 512 << 10, 2 << 20};
constexpr int kSyncWaitReps = 5;

// What a synchronising collective costs beyond its own time when the ranks compute between
// collectives, as a training step's tensor-parallel, ring and pipeline transfers do: the latest
// member's lateness (a rank descheduled on a shared core, one slower than its peers). Every rank
// runs `kRounds` rounds of a compute segment (a forward GEMM of the job's MLP, the span between
// two tensor-parallel collectives) each followed by an all-reduce of `bytes` of all ranks, the
// same segments alone, and the all-reduces alone: wait = (rounds - segments - all-reduces) /
// kRounds, the median of kSyncWaitReps repeats, rank 0's view (it writes the file).
// MeasureComm measures it at every size of kSyncWaitBytes (a tensor-parallel layer's
// activations, from a few sequences to the demo's 16 of 128 x 256: 2 MiB), and the planner takes
// the median of all of them: where ranks share cores the wait comes in scheduler time slices, and
// one size measured 0.10 to 1.44 ms in calibrations minutes apart (4 ranks on this VM's 2 cores);
// the sizes did not differ beyond that spread (docs/BENCHMARKS.md).
Result<double> MeasureSyncWait(Communicator& comm, const PlanJob* job, int64_t bytes) {
  constexpr int kRounds = 24;
  MlpMatrix mlp(job);
  const int64_t n = bytes / 4;
  std::vector<float> buf(static_cast<size_t>(n), 1.0f);
  KeepIfAbandoned keep(&comm);
  keep(buf);
  auto rounds = [&](bool compute, bool sync) -> Status {
    for (int i = 0; i < kRounds; ++i) {
      if (compute) mlp.Forward();
      if (sync) LOOM_RETURN_IF_ERROR(comm.AllReduce(buf.data(), n));
    }
    return Status::Ok();
  };
  std::vector<double> waits;
  for (int rep = 0; rep < kSyncWaitReps; ++rep) {
    LOOM_ASSIGN_OR_RETURN(double both, TimeTogether(comm, 1, [&] { return rounds(true, true); }));
    LOOM_ASSIGN_OR_RETURN(double seg, TimeTogether(comm, 1, [&] { return rounds(true, false); }));
    LOOM_ASSIGN_OR_RETURN(double ar, TimeTogether(comm, 1, [&] { return rounds(false, true); }));
    waits.push_back(std::max(0.0, both - seg - ar) / kRounds);
  }
  std::sort(waits.begin(), waits.end());
  return waits[waits.size() / 2];
}

// What sharing the cores costs the compute where the world has more ranks than the node has
// cores (`loom launch`'s default here: 4 ranks on 2 cores): beyond each rank's share of a core,
// switches between ranks and caches refilled after another rank's time slice (on this VM's two
// cores a GEMM loop keeps 0.90-1.05 of its rate; docs/BENCHMARKS.md). The ranks' total rate of the
// job's forward GEMM with all of them computing, over the total of `cores` of them computing while
// the others sleep (a core each, as the compute samples were measured), in windows of kShareWindow
// over seconds (a scheduler time slice is milliseconds) and in A B B A order, so that the machine's
// drift cancels.
constexpr int kShareWindows = 24;
constexpr auto kShareWindow = std::chrono::milliseconds(400);

Result<double> MeasureTimeSharing(Communicator& comm, const PlanJob* job, int cores) {
  MlpMatrix mlp(job);
  mlp.Forward();  // warm-up: first touches of the operands
  double total[2] = {0, 0};
  for (int w = 0; w < kShareWindows; ++w) {
    const bool all = w % 4 == 1 || w % 4 == 2;
    LOOM_RETURN_IF_ERROR(comm.Barrier());
    const auto start = std::chrono::steady_clock::now(), until = start + kShareWindow;
    float rate = 0;
    if (all || comm.rank() < cores) {
      int calls = 0;
      do {
        mlp.Forward();
        ++calls;
      } while (std::chrono::steady_clock::now() < until);
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      rate = static_cast<float>(calls * mlp.ForwardFlops() / secs);
    } else {
      std::this_thread::sleep_until(until);
    }
    LOOM_RETURN_IF_ERROR(comm.AllReduce(&rate, 1));
    total[all ? 1 : 0] += rate;
  }
  return std::clamp(total[1] / std::max(total[0], 1.0), 0.05, 2.0);
}

}  // namespace

Status MeasureComm(Backend& backend, int64_t max_bytes, const PlanJob* job, Calibration* cal) {
  const int world = backend.world_size(), rank = backend.world_rank();
  std::vector<std::pair<double, double>> pair_allreduce;
  for (int g = 2; g <= world; ++g) {
    // Groups of g consecutive ranks, as many as fit, measure at once, as a job's tensor-,
    // context- and data-parallel groups run their collectives together; the ranks left over
    // (world % g) sit this size out. Measured by the first group alone while the other ranks
    // waited in their next group's creation, a 2-rank group of 4 ranks on 2 cores ran its small
    // collectives in 4-12 ms instead of tens of microseconds: the waiting ranks held the cores.
    const std::vector<int> members = CalibrationGroup(rank, world, g);
    const bool member = !members.empty();
    std::shared_ptr<Communicator> comm;
    if (member) {
      LOOM_ASSIGN_OR_RETURN(
          comm, backend.CreateGroup(
                    "calib" + std::to_string(g) + "." + std::to_string(members.front()), members));
    }
    for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
      const int64_t n = bytes / 4 / g * g;
      std::vector<float> buf(static_cast<size_t>(n), 1.0f), out(static_cast<size_t>(n));
      KeepIfAbandoned keep(comm.get());  // a late peer may still write them after a timeout
      keep(buf);
      keep(out);
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
        // One hop of a ring (context parallelism) or of a pipeline in its steady state: each
        // rank sends a message to its neighbour and receives one at the same time.
        ops.push_back({"send_recv", [&] { return Exchange(*comm, buf.data(), out.data(), n); }});
      }
      for (const Op& op : ops) {
        if (!member) continue;
        // Every member runs the same number of calls (a fixed count, not a time budget), each
        // started together, as the runtime's collectives are; the median call counts.
        LOOM_RETURN_IF_ERROR(op.run());  // warm-up
        LOOM_ASSIGN_OR_RETURN(double t, TimeTogether(*comm, bytes >= (8 << 20) ? 7 : 21, op.run));
        cal->collectives.push_back({op.name, g, static_cast<double>(n * 4), t});
        if (g == 2 && std::string(op.name) == "all_reduce") {
          pair_allreduce.push_back({static_cast<double>(n * 4), t});
        }
      }
    }
    if (g == 2 && member) {
      LOOM_ASSIGN_OR_RETURN(cal->overlap_slowdown, MeasureOverlap(*comm, job));
    }
    if (g == world) {
      for (const int64_t bytes : kSyncWaitBytes) {
        LOOM_ASSIGN_OR_RETURN(const double wait, MeasureSyncWait(*comm, job, bytes));
        cal->collectives.push_back({"sync_wait", g, static_cast<double>(bytes), wait});
      }
      const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      if (world > cores && backend.local_size() == world) {
        LOOM_ASSIGN_OR_RETURN(const double e, MeasureTimeSharing(*comm, job, cores));
        cal->time_sharing.push_back({world, cores, e});
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

}  // namespace loom
