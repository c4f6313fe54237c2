// Interrupt recording for the file-writing tools (see interrupt.h).
#include "core/interrupt.h"

#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace loom {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_handled[3] = {0, 0, 0};  // per kSignals: installed here

void Record(int sig) {
  if (g_signal == 0) g_signal = sig;
  // Whichever comes next (Ctrl-C, then the supervisor's SIGTERM) has its default action.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int i = 0; i < 3; ++i) {
    if (g_handled[i]) ::sigaction(kSignals[i], &dfl, nullptr);  // async-signal-safe
  }
}

}  // namespace

void InstallInterruptHandlers(int except) {
  struct sigaction sa {};
  sa.sa_handler = Record;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int i = 0; i < 3; ++i) {
    if (kSignals[i] == except) continue;
    // A signal ignored from the start stays ignored (nohup, a script's background job).
    struct sigaction old {};
    if (::sigaction(kSignals[i], nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    g_handled[i] = 1;
    ::sigaction(kSignals[i], &sa, nullptr);
  }
}

int InterruptSignal() {
  return g_signal;
}

Status CheckInterrupted(const char* what, bool writing) {
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
  if (!writing) {
    return IoError(std::string("interrupted by SIG") + sigabbrev_np(sig) + " while reading " +
                   what);
  }
  return IoError(std::string("interrupted by SIG") + sigabbrev_np(sig) + " while writing " + what +
                 "; its partial output was removed");
}

}  // namespace loom
