// Overlap of data-parallel communication with compute: dp = 2, ZeRO-2, a model with many
// parameters and a small batch (communication is a large share of the step). Runs the same job
// with overlap on (reduce-scatters start as each layer's backward finishes; parameter all-gathers
// run under the next forward) and off (every reduction waited for at once), and reports the
// exposed fraction from the collective trace: time compute waited on communication / time the
// communication ran. Run: mpirun -np 2 build/bench/overlap_bench [--steps N]. Last line:
//   overlap_on_ms=... overlap_off_ms=... exposed_fraction=...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "comm/backend.h"
#include "core/threads.h"
#include "parallel/process_groups.h"
#include "worker/trainer.h"

namespace {

struct Phase {
  double step_ms = 0, comm_ms = 0, waited_ms = 0;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

loom::Status RunPhase(loom::Backend& rt, const loom::Placement& place, const loom::JobConfig& base,
                      bool overlap, int steps, Phase* out) {
  loom::JobConfig job = base;
  job.parallel.overlap = overlap;
  loom::Communicator* dp = place.dp;
  LOOM_ASSIGN_OR_RETURN(auto trainer, loom::Trainer::Create(job, place));
  std::vector<double> times;
  for (int s = 0; s < steps + 2; ++s) {
    if (s == 2) rt.trace().Clear();  // warm-up excluded
    LOOM_RETURN_IF_ERROR(dp->Barrier());
    auto t0 = std::chrono::steady_clock::now();
    LOOM_ASSIGN_OR_RETURN(loom::StepStats st, trainer->Step(s));
    (void)st;
    if (s >= 2) {
      times.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  double comm_ns = 0, wait_ns = 0;
  for (const loom::TraceRecord& r : rt.trace().Snapshot()) {
    if (r.group != "dp" || r.end_ns == 0 || r.op == loom::CommOp::kBarrier) continue;
    comm_ns += static_cast<double>(r.end_ns - r.start_ns);
    wait_ns += static_cast<double>(r.wait_ns);
  }
  out->step_ms = Median(times);
  out->comm_ms = comm_ns / 1e6 / steps;
  out->waited_ms = wait_ns / 1e6 / steps;
  return loom::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  auto rt = loom::CreateBackend(loom::BackendKind::kMpi, {.argc = &argc, .argv = &argv});
  if (!rt.ok() || (*rt)->world_size() != 2) {
    std::fprintf(stderr, "overlap_bench: run with mpirun -np 2\n");
    return 1;
  }
  int steps = 6;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
  }
  loom::ConfigureThreads(1);  // one core per rank
  auto place = loom::ProcessGroups::Create(**rt, loom::Layout{.dp = 2, .zero = 2});
  if (!place.ok()) return 1;
  loom::JobConfig job;
  job.path = "overlap_bench";
  job.model = {256, 64, 6, 8, 512};  // 19M parameters
  job.data.text = LOOM_SOURCE_DIR "/data/tinyshakespeare.txt";
  job.data.val_fraction = 0;
  job.data.seq = 64;
  job.data.global_batch = 2;
  job.data.micro_batch = 1;
  job.steps = steps + 2;
  job.optim.lr = 1e-4;
  Phase on, off;
  loom::Status st = RunPhase(**rt, *place, job, true, steps, &on);
  if (st.ok()) st = RunPhase(**rt, *place, job, false, steps, &off);
  if (!st.ok()) {
    std::fprintf(stderr, "overlap_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  if ((*rt)->world_rank() == 0) {
    std::printf(
        "model 6 layers x 512 hidden (19M params), global batch 2 x 64 tokens, dp=2, zero=2, "
        "1 thread/rank, 2 ranks on 2 cores\n");
    std::printf(
        "overlap off: %.1f ms/step, dp communication %.1f ms/step (%.0f%% of the step), "
        "waited %.1f ms\n",
        off.step_ms, off.comm_ms, 100 * off.comm_ms / off.step_ms, off.waited_ms);
    std::printf(
        "overlap on:  %.1f ms/step, dp communication %.1f ms/step, waited %.1f ms "
        "(exposed %.0f%%)\n",
        on.step_ms, on.comm_ms, on.waited_ms, 100 * on.waited_ms / on.comm_ms);
    std::printf("overlap_on_ms=%.1f overlap_off_ms=%.1f exposed_fraction=%.3f\n", on.step_ms,
                off.step_ms, on.waited_ms / on.comm_ms);
  }
  return 0;
}
