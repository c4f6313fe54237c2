// The stop signal: a flag set by the handler, read at step boundaries.
#include "worker/stop_signal.h"

#include <atomic>
#include <cctype>
#include <csignal>
#include <cstring>
#include <utility>

namespace loom {
namespace {

volatile std::sig_atomic_t g_received = 0;

void OnSignal(int sig) {
  g_received = sig;
}

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
