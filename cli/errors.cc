// User-facing error printing.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include "cli/commands.h"
#include "core/logging.h"

namespace loom {

namespace {

// This process's rank and the launch's size from its launcher's environment (-1, 0: none).
void LaunchRank(int* rank, int* size) {
  *rank = -1;
  *size = 0;
  for (const auto& [r, n] :
       {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        std::pair{"PMIX_RANK", "PMIX_SIZE"}, std::pair{"SLURM_PROCID", "SLURM_NTASKS"}}) {
    const char* rv = std::getenv(r);
    const char* nv = std::getenv(n);
    if (rv != nullptr && nv != nullptr) {
      *rank = std::atoi(rv);
      *size = std::atoi(nv);
      return;
    }
  }
}

}  // namespace

int ReportError(const std::string& command, const Status& status) {
  const std::string msg = ForUser(status, LogSubsys::CLI);
  std::fprintf(stderr, "loom %s: error: %s\n", command.c_str(), msg.c_str());
  return 1;
}

int ReportStartupError(const std::string& command, const Status& status) {
  int rank = -1, size = 0;
  LaunchRank(&rank, &size);
  if (rank <= 0 || size <= 1) return ReportError(command, status);
  std::this_thread::sleep_for(std::chrono::milliseconds(kStartupErrorGraceMs));
  return ReportError(
      command, Status(status.code(), "rank " + std::to_string(rank) + ": " + status.message()));
}

}  // namespace loom
