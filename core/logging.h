// Logging by level and subsystem (NCCL_DEBUG / NCCL_DEBUG_SUBSYS style).
//
//   LOOM_LOG(INFO, TRAIN) << "step " << step << " loss " << loss;
//
// Filtering: LOOM_LOG_LEVEL=DEBUG|INFO|WARN|ERROR (default INFO) and LOOM_LOG_SUBSYS=TRAIN,DATA
// (default: all). A line is "[loom rank R] LEVEL SUBSYS message" on stderr. Thread-safe: each line
// is written with one call under a mutex.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace loom {

class Status;

enum class LogLevel { DEBUG = 0, INFO = 1, WARN = 2, ERROR = 3 };
enum class LogSubsys : unsigned {
  CORE = 1,
  DATA = 2,
  TRAIN = 4,
  COMM = 8,
  CKPT = 16,
  CLI = 32,
  COORD = 64,
  SNAP = 128,  // in-memory snapshots
};

// True when a message of this level and subsystem would be printed.
bool LogEnabled(LogLevel level, LogSubsys subsys);
// A status's message for people: without its " [at file:line]" trail, unless DEBUG logging is on
// for `subsys` (LOOM_LOG_LEVEL=DEBUG), where the trail helps a bug report.
std::string ForUser(const Status& status, LogSubsys subsys);
// Sets the rank shown in each line (-1: none). Call once after the communicator is up.
void SetLogRank(int rank);
// Overrides the environment's level (used by --verbose / tests).
void SetLogLevel(LogLevel level);
void EmitLog(LogLevel level, LogSubsys subsys, std::string_view message);

// Collects one line and emits it when destroyed.
class LogLine {
 public:
  LogLine(LogLevel level, LogSubsys subsys) : level_(level), subsys_(subsys) {}
  ~LogLine() { EmitLog(level_, subsys_, stream_.str()); }
  std::ostringstream& stream() { return stream_; }

 private:
  LogLevel level_;
  LogSubsys subsys_;
  std::ostringstream stream_;
};

}  // namespace loom

#define LOOM_LOG(level, subsys)                                                \
  if (!::loom::LogEnabled(::loom::LogLevel::level, ::loom::LogSubsys::subsys)) \
    ;                                                                          \
  else                                                                         \
    ::loom::LogLine(::loom::LogLevel::level, ::loom::LogSubsys::subsys).stream()
