// Interrupt recording for the file-writing tools (see interrupt.h), on core/signals.
#include "core/interrupt.h"

#include <signal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/signals.h"

namespace loom {
namespace {

constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
std::atomic<int> g_handled[kSignals.size()];  // per kSignals: the signal when installed here

}  // namespace

std::vector<int> InstallInterruptHandlers(int except) {
  std::vector<int> wanted;
  for (const int sig : kSignals) {
    if (sig != except) wanted.push_back(sig);
  }
  // A signal ignored from the start stays ignored (nohup, a script's background job);
  // whichever comes after the first (Ctrl-C, then the supervisor's SIGTERM) has its default
  // action.
  std::vector<int> handled =
      RecordSignals(wanted, OnRepeat::kDefaultAction, IfIgnored::kStayIgnored);
  for (size_t i = 0; i < kSignals.size(); ++i) {
    const bool in = std::find(handled.begin(), handled.end(), kSignals[i]) != handled.end();
    g_handled[i].store(in ? kSignals[i] : 0);
  }
  return handled;
}

int InterruptSignal() {
  std::array<int, kSignals.size()> handled{};
  for (size_t i = 0; i < kSignals.size(); ++i) handled[i] = g_handled[i].load();
  return FirstSignal(handled);
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
  const int sig = InterruptSignal();
  if (sig == 0) return Status::Ok();
  if (!writing) {
    return IoError(std::string("interrupted by SIG") + sigabbrev_np(sig) + " while reading " +
                   what);
  }
  return IoError(std::string("interrupted by SIG") + sigabbrev_np(sig) + " while writing " + what +
                 "; its partial output was removed");
}

}  // namespace loom
