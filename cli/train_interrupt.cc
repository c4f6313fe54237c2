// A thread that takes the interrupting signals (sigwait) and prints where the run can resume.
#include "cli/train_interrupt.h"

#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

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
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') {
      g_rank.store(std::atoi(v));
      break;
    }
  }
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    if (sig != job.checkpoint.stop_signal) sigaddset(&set, sig);
  }
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return;
  std::thread([set, job] {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) return;
    // From here the signals kill: a second one while the directory is listed ends the process.
    for (int s : {SIGINT, SIGTERM, SIGHUP}) {
      if (sigismember(&set, s)) std::signal(s, SIG_DFL);
    }
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    if (g_rank.load() == 0) {
      const std::string what = DescribeRestart(job);
      std::fprintf(stderr, "\nloom train: interrupted (%s); %s\n", strsignal(sig), what.c_str());
      std::fflush(stderr);
    }
    std::raise(sig);
  }).detach();
}

}  // namespace loom
