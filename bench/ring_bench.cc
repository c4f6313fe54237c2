// Ring attention overlap: cp = 2 on 2 ranks (one core each), seq 2048. Reports the fraction of
// key/value transfer time hidden behind block compute, from the collective trace: for the K/V
// messages of the forward and backward rings, 1 - (time compute waited on them) / (time they
// were in flight). Run: mpirun -np 2 build/bench/ring_bench. Last line: kv_hidden_fraction=...
#include <chrono>
#include <cstdio>
#include <vector>

#include "comm/backend.h"
#include "core/threads.h"
#include "parallel/process_groups.h"
#include "worker/trainer.h"

int main(int argc, char** argv) {
  auto rt = loom::CreateBackend(loom::BackendKind::kMpi, {.argc = &argc, .argv = &argv});
  if (!rt.ok() || (*rt)->world_size() != 2) {
    std::fprintf(stderr, "ring_bench: run with mpirun -np 2\n");
    return 1;
  }
  loom::ConfigureThreads(1);
  // The trainer shares the ownership of its communicators: whatever is released first below,
  // they outlive it.
  auto place = loom::ProcessGroups::Create(**rt, loom::Layout{.cp = 2});
  if (!place.ok()) return 1;
  loom::Communicator& cp = *place->cp;
  loom::JobConfig job;
  job.path = "ring_bench";
  job.model = {256, 2048, 2, 4, 128};
  job.data.text = LOOM_SOURCE_DIR "/data/tinyshakespeare.txt";
  job.data.val_fraction = 0;
  job.data.seq = 2048;
  job.data.global_batch = 1;
  job.data.micro_batch = 1;
  job.steps = 5;
  job.optim.lr = 1e-4;
  auto trainer = loom::Trainer::Create(job, *place);
  if (!trainer.ok()) {
    std::fprintf(stderr, "%s\n", trainer.status().ToString().c_str());
    return 1;
  }
  std::vector<double> ms;
  for (int s = 0; s < 5; ++s) {
    if (s == 1) (*rt)->trace().Clear();  // first step is warm-up
    auto t0 = std::chrono::steady_clock::now();
    if (!(*trainer)->Step(s).ok()) return 1;
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  double flight = 0, waited = 0;
  int messages = 0;
  for (const loom::TraceRecord& r : (*rt)->trace().Snapshot()) {
    const bool kv = r.tag >= 100 && r.tag < 300;  // K/V rings (forward 100+, backward 200+)
    if (r.group != "cp" || !kv || r.end_ns == 0) continue;
    flight += static_cast<double>(r.end_ns - r.start_ns);
    waited += static_cast<double>(r.wait_ns);
    ++messages;
  }
  std::vector<float> sums{static_cast<float>(flight), static_cast<float>(waited)};
  if (!cp.AllReduce(sums.data(), 2).ok()) return 1;
  if ((*rt)->world_rank() == 0) {
    std::printf(
        "cp=2, seq 2048 (1024 tokens per rank), 2 layers x 128 hidden, 1 thread/rank; "
        "step %.1f ms\n",
        ms.back());
    std::printf(
        "K/V messages: %d on rank 0; in flight %.1f ms, compute waited %.1f ms (both ranks, "
        "4 steps)\n",
        messages, sums[0] / 1e6, sums[1] / 1e6);
    std::printf("kv_hidden_fraction=%.3f\n", 1.0 - sums[1] / sums[0]);
  }
  return 0;
}
