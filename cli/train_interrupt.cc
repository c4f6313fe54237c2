// The interrupt handlers record the signal and write a byte to a pipe; a thread waiting on the
// pipe does what a handler must not (list the checkpoint directory, print).
#include "cli/train_interrupt.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "checkpoint/export.h"
#include "worker/checkpointer.h"

namespace loom {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
std::atomic<int> g_rank{0};
volatile std::sig_atomic_t g_signal = 0;
int g_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  if (g_signal == 0) g_signal = sig;
  const char c = 1;
  (void)!::write(g_pipe[1], &c, 1);  // async-signal-safe
}

}  // namespace

void SetInterruptRank(int rank) {
  g_rank.store(rank);
}

void WatchInterrupts(const JobConfig& job) {
  if (job.checkpoint.dir.empty()) return;  // nothing to name: the default actions as they are
  // Until MPI says: the launcher's word (a signal while MPI starts prints from rank 0 only).
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') {
      g_rank.store(std::atoi(v));
      break;
    }
  }
  if (::pipe2(g_pipe, O_CLOEXEC) != 0) return;  // left as they are
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  bool any = false;
  for (int sig : kSignals) {
    if (sig == job.checkpoint.stop_signal) continue;  // saves and stops (worker/stop_signal.h)
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    any = ::sigaction(sig, &sa, nullptr) == 0 || any;
  }
  if (!any) return;
  std::thread([job] {
    char c = 0;
    while (::read(g_pipe[0], &c, 1) < 0 && errno == EINTR) {
    }
    const int sig = g_signal;
    // From here the signals kill: a second one while the directory is listed ends the process.
    for (int s : kSignals) {
      if (s != job.checkpoint.stop_signal) std::signal(s, SIG_DFL);
    }
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
