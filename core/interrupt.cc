// Interrupt recording for the file-writing tools (see interrupt.h).
#include "core/interrupt.h"

#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace loom {
namespace {

volatile sig_atomic_t g_signal = 0;

void Record(int sig) {
  if (g_signal == 0) g_signal = sig;
}

}  // namespace

void InstallInterruptHandlers() {
  struct sigaction sa {};
  sa.sa_handler = Record;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_RESETHAND;  // the second one: default action
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

int InterruptSignal() {
  return g_signal;
}

Status CheckInterrupted(const char* what) {
  // Fault injection for the tests: LOOM_FAULT_INTERRUPT_AT=N sends this process SIGINT at the
  // N-th check, through the handler above, as a Ctrl-C at that moment would.
  static const int raise_at = [] {
    const char* v = std::getenv("LOOM_FAULT_INTERRUPT_AT");
    return v != nullptr ? std::atoi(v) : 0;
  }();
  static int checks = 0;
  if (raise_at > 0 && ++checks == raise_at) ::raise(SIGINT);
  const int sig = g_signal;
  if (sig == 0) return Status::Ok();
  return IoError(std::string("interrupted by SIG") + sigabbrev_np(sig) + " while writing " + what +
                 "; its partial output was removed");
}

}  // namespace loom
