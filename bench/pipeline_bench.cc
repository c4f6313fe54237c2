// Pipeline step time, measured and predicted: pp = 2 on 2 cores (one rank per core), GPipe,
// 1F1B and interleaved (v = 2) for m in {2, 4, 8}. The prediction runs the same schedule through
// the simulator with per-instruction costs measured in this run (mean forward and backward of a
// chunk, half a ping-pong of one activation for a transfer, the optimizer step).
// Run: mpirun -np 2 build/bench/pipeline_bench. Last line: pipeline_max_error=<worst |pred/meas -
// 1|>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "comm/backend.h"
#include "core/threads.h"
#include "parallel/pipeline/simulator.h"
#include "worker/trainer.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  auto rt = loom::CreateBackend(loom::BackendKind::kMpi, {.argc = &argc, .argv = &argv});
  if (!rt.ok() || (*rt)->world_size() != 2) {
    std::fprintf(stderr, "pipeline_bench: run with mpirun -np 2\n");
    return 1;
  }
  loom::ConfigureThreads(1);
  auto groups = loom::ProcessGroups::Create(**rt, loom::Layout{.pp = 2});
  if (!groups.ok()) return 1;
  loom::Communicator& comm = *groups->pp;
  const bool root = (*rt)->world_rank() == 0;
  loom::JobConfig base;
  base.path = "pipeline_bench";
  base.model = {256, 128, 8, 8, 256};
  base.data.text = LOOM_SOURCE_DIR "/data/tinyshakespeare.txt";
  base.data.val_fraction = 0;
  base.data.seq = 128;
  base.data.micro_batch = 2;
  base.optim.lr = 1e-4;
  // One activation transfer: half a ping-pong of micro_batch * seq * hidden floats.
  std::vector<float> act(
      static_cast<size_t>(base.data.micro_batch * base.data.seq * base.model.hidden));
  std::vector<double> rtts;
  for (int i = 0; i < 12; ++i) {
    auto t0 = Clock::now();
    const int64_t n = static_cast<int64_t>(act.size());
    loom::Status st = root ? comm.Send(act.data(), n, 1, 7) : comm.Recv(act.data(), n, 0, 7);
    if (st.ok()) st = root ? comm.Recv(act.data(), n, 1, 8) : comm.Send(act.data(), n, 0, 8);
    if (!st.ok()) return 1;
    if (i >= 2) rtts.push_back(Seconds(t0));
  }
  const double p2p = Median(rtts) / 2;
  if (root) {
    std::printf(
        "pp=2, 2 ranks x 1 thread; model 8 layers x 256 hidden, micro-batch 2 x 128 tokens; "
        "p2p transfer %.2f ms\n",
        p2p * 1e3);
    std::printf("%-12s %3s %12s %12s %8s\n", "schedule", "m", "measured ms", "predicted ms",
                "error");
  }
  double worst = 0;
  struct Case {
    const char* schedule;
    int vpp;
  };
  for (Case c : {Case{"gpipe", 1}, Case{"1f1b", 1}, Case{"interleaved", 2}}) {
    for (int m : {2, 4, 8}) {
      loom::JobConfig job = base;
      job.data.global_batch = m * job.data.micro_batch;
      job.parallel.schedule = c.schedule;
      job.steps = 8;
      loom::Placement place = *groups;  // the same communicators
      place.layout.vpp = c.vpp;
      auto trainer = loom::Trainer::Create(job, place);
      if (!trainer.ok()) {
        std::fprintf(stderr, "%s\n", trainer.status().ToString().c_str());
        return 1;
      }
      std::vector<double> steps;
      double opt_s = 0;
      for (int s = 0; s < 7; ++s) {
        if (s == 2) (*trainer)->pipeline_timings() = {};
        if (!comm.Barrier().ok()) return 1;
        auto t0 = Clock::now();
        auto loss = (*trainer)->ComputeGradients(
            std::vector<int32_t>(job.data.global_batch * job.data.seq, 1).data(),
            std::vector<int32_t>(job.data.global_batch * job.data.seq, 2).data());
        auto t1 = Clock::now();
        auto norm = (*trainer)->ApplyUpdate(1e-4);
        if (!loss.ok() || !norm.ok()) return 1;
        if (s >= 2) {
          steps.push_back(Seconds(t0));
          opt_s += std::chrono::duration<double>(Clock::now() - t1).count();
        }
      }
      const loom::PipelineTimings& t = (*trainer)->pipeline_timings();
      // Costs averaged over both ranks (the simulator takes one cost per instruction kind).
      std::vector<float> costs{static_cast<float>(t.forward_s / std::max(1, t.forwards)),
                               static_cast<float>(t.backward_s / std::max(1, t.backwards)),
                               static_cast<float>(opt_s / steps.size())};
      if (!comm.AllReduce(costs.data(), 3).ok()) return 1;
      loom::PipelineCosts pc;
      pc.forward = costs[0] / 2;
      pc.backward = costs[1] / 2;
      pc.p2p_latency = p2p;
      auto sim = loom::Simulate((*trainer)->schedule(), pc);
      if (!sim.ok()) return 1;
      const double measured = Median(steps), predicted = sim->step_time + costs[2] / 2;
      const double err = predicted / measured - 1;
      worst = std::max(worst, std::fabs(err));
      if (root) {
        std::printf("%-12s %3d %12.1f %12.1f %+7.1f%%\n", c.schedule, m, measured * 1e3,
                    predicted * 1e3, 100 * err);
      }
    }
  }
  if (root) std::printf("pipeline_max_error=%.3f\n", worst);
  return 0;
}
