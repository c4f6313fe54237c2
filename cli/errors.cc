// User-facing error printing.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "core/logging.h"

namespace loom {

int ReportError(const std::string& command, const Status& status) {
  std::string msg = status.message();
  if (!LogEnabled(LogLevel::DEBUG, LogSubsys::CLI)) {
    size_t at = msg.find(" [at ");
    if (at != std::string::npos) msg.erase(at);
  }
  std::fprintf(stderr, "loom %s: error: %s\n", command.c_str(), msg.c_str());
  return 1;
}

}  // namespace loom
