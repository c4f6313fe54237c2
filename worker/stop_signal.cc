// The stop signal: a flag set by the handler, read at step boundaries.
#include "worker/stop_signal.h"

#include <csignal>
#include <cstring>

namespace loom {
namespace {

volatile std::sig_atomic_t g_received = 0;

void OnSignal(int sig) {
  g_received = sig;
}

}  // namespace

void InstallStopSignal(int sig) {
  // Installed once the job is known and again by the trainer: after a signal has come, the
  // handler is not armed again, so the next one still has its default effect.
  if (sig == 0 || g_received != 0) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  // SA_RESTART: blocking I/O and waits carry on, the flag is read between steps. SA_RESETHAND:
  // a second signal has its default effect, so a run stuck while saving can still be stopped.
  sa.sa_flags = SA_RESTART | SA_RESETHAND;
  ::sigaction(sig, &sa, nullptr);
}

int PendingStopSignal() {
  return g_received;
}

}  // namespace loom
