#include "core/signal_names.h"

#include <cctype>
#include <csignal>
#include <utility>

namespace loom {
namespace {

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

}  // namespace loom
