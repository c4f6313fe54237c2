// The stop signal: its names, exit codes and record (core/signals), read at step boundaries.
#include "core/stop_signal.h"

#include <atomic>
#include <cctype>
#include <csignal>
#include <utility>

#include "core/signals.h"

namespace loom {
namespace {

std::atomic<int> g_stop_signal{0};  // the signal InstallStopSignal handles (0: none)

constexpr std::pair<const char*, int> kSignals[] = {
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"INT", SIGINT}};

}  // namespace

Result<int> ParseStopSignal(const std::string& name, const std::string& where) {
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "NONE") return 0;
  const std::string bare = upper.rfind("SIG", 0) == 0 ? upper.substr(3) : upper;
  for (const auto& [n, sig] : kSignals) {
    if (bare == n) return sig;
  }
  return InvalidArgument(where + ": expected SIGUSR1, SIGUSR2, SIGTERM, SIGINT or none, got '" +
                         name + "'");
}

int StopExitCode(int reason) {
  if (reason == 0) return 0;
  return reason == kStopTimeLimit ? 75 : 128 + reason;
}

std::string StopSignalName(int sig) {
  if (sig == kStopTimeLimit) return "the time limit";
  for (const auto& [n, s] : kSignals) {
    if (s == sig) return std::string("SIG") + n;
  }
  return sig == 0 ? "none" : "signal " + std::to_string(sig);
}

void InstallStopSignal(int sig) {
  // Installed once the job is known and again by the trainer: after a signal has come, the
  // handler is not armed again, so the next one still has its default effect.
  if (sig == 0 || PendingStopSignal() != 0) return;
  // kDefaultAction: a second signal has its default effect, so a run stuck while saving can
  // still be stopped.
  RecordSignals({sig}, OnRepeat::kDefaultAction, IfIgnored::kTakeOver);
  g_stop_signal.store(sig);
}

int PendingStopSignal() {
  const int sig = g_stop_signal.load();
  return sig != 0 && SignalCount(sig) > 0 ? sig : 0;
}

}  // namespace loom
