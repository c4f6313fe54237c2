// User-facing error printing.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "core/logging.h"

namespace loom {

int ReportError(const std::string& command, const Status& status) {
  const std::string msg = ForUser(status, LogSubsys::CLI);
  std::fprintf(stderr, "loom %s: error: %s\n", command.c_str(), msg.c_str());
  return 1;
}

int LauncherRank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoi(v);
  }
  return -1;
}

int ReportStartupError(const std::string& command, const Status& status) {
  const int rank = LauncherRank();
  if (rank <= 0) return ReportError(command, status);
  std::this_thread::sleep_for(std::chrono::milliseconds(kStartupErrorGraceMs));
  return ReportError(
      command, Status(status.code(), "rank " + std::to_string(rank) + ": " + status.message()));
}

}  // namespace loom
