// User-facing error printing.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "core/logging.h"

namespace loom {

int ReportError(const std::string& command, const Status& status) {
  const std::string msg = ForUser(status, LogSubsys::CLI);
  std::fprintf(stderr, "loom %s: error: %s\n", command.c_str(), msg.c_str());
  return 1;
}

}  // namespace loom
