// Interrupt recording for the file-writing tools (see interrupt.h), on core/signals.
#include "core/interrupt.h"

#include <signal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/fault_point.h"
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
  // For the tests, a Ctrl-C at this moment (LOOM_FAULT_INTERRUPT_AT, fault/inject.h): the
  // SIGINT goes through the handler above.
  FaultPoint({FaultSite::kInterruptCheck});
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
