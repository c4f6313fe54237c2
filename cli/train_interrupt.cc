// core/interrupt's handlers record the signal; a thread that waits for it (core/signals) does
// what a handler must not (list the checkpoint directory, print).
#include "cli/train_interrupt.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/export.h"
#include "cli/commands.h"
#include "core/interrupt.h"
#include "core/signals.h"
#include "worker/checkpointer.h"

namespace loom {
namespace {

std::atomic<int> g_rank{0};

}  // namespace

void SetInterruptRank(int rank) {
  g_rank.store(rank);
}

void WatchInterrupts(const JobConfig& job) {
  if (job.checkpoint.dir.empty()) return;  // nothing to name: the default actions as they are
  // Until MPI says: the launcher's word (a signal while MPI starts prints from rank 0 only).
  if (const int rank = LauncherRank(); rank >= 0) g_rank.store(rank);
  // (The job's checkpoint.signal saves and stops instead.)
  std::vector<int> handled = InstallInterruptHandlers(job.checkpoint.stop_signal);
  if (handled.empty()) return;  // all ignored from the start (nohup)
  std::thread([job, waiter = SignalWaiter(std::move(handled))]() mutable {
    int sig = 0;
    while ((sig = waiter.Wait(std::chrono::steady_clock::time_point::max())) == 0) {
    }
    // The handlers have given the signals their default action back: a second one while the
    // directory is listed ends the process.
    if (!job.checkpoint.export_path.empty()) RemoveExportLeftovers(job.checkpoint.export_path);
    if (g_rank.load() == 0) {
      const std::string what = DescribeRestart(job);
      std::fprintf(stderr, "\nloom train: interrupted (%s); %s\n", strsignal(sig), what.c_str());
      std::fflush(stderr);
    }
    std::raise(sig);
  }).detach();
}

}  // namespace loom
