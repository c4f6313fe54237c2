// Level/subsystem filtered logging to stderr.
#include "core/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/tunables.h"

namespace loom {
namespace {

struct LogSettings {
  std::atomic<int> level{static_cast<int>(LogLevel::INFO)};
  std::atomic<unsigned> subsys_mask{~0u};
  std::atomic<int> rank{-1};
  std::mutex mu;  // serialises whole lines
};

const char* SubsysName(LogSubsys s) {
  switch (s) {
    case LogSubsys::CORE:
      return "CORE";
    case LogSubsys::DATA:
      return "DATA";
    case LogSubsys::TRAIN:
      return "TRAIN";
    case LogSubsys::COMM:
      return "COMM";
    case LogSubsys::CKPT:
      return "CKPT";
    case LogSubsys::CLI:
      return "CLI";
    case LogSubsys::COORD:
      return "COORD";
    case LogSubsys::SNAP:
      return "SNAP";
  }
  return "?";
}

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::DEBUG:
      return "DEBUG";
    case LogLevel::INFO:
      return "INFO";
    case LogLevel::WARN:
      return "WARN";
    case LogLevel::ERROR:
      return "ERROR";
  }
  return "?";
}

// LOOM_LOG_SUBSYS: a comma-separated list of subsystems; one that is not known would silently
// log nothing.
Status CheckLogSubsys() {
  const char* v = std::getenv("LOOM_LOG_SUBSYS");
  if (v == nullptr || *v == '\0') return Status::Ok();
  std::string_view rest(v);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    bool known = false;
    for (unsigned bit = 1; bit <= 128; bit <<= 1) {
      known = known || name == SubsysName(static_cast<LogSubsys>(bit));
    }
    if (!known) {
      return InvalidArgument(
          "environment variable LOOM_LOG_SUBSYS: expected a comma-separated list of CORE, "
          "DATA, TRAIN, COMM, CKPT, CLI, COORD, SNAP, got '" +
          std::string(v) + "'");
    }
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return Status::Ok();
}

Status CheckLogLevel() {
  const char* v = std::getenv("LOOM_LOG_LEVEL");
  if (v == nullptr || *v == '\0') return Status::Ok();
  for (int l = 0; l <= 3; ++l) {
    if (strcasecmp(v, LevelName(static_cast<LogLevel>(l))) == 0) return Status::Ok();
  }
  return InvalidArgument(std::string("environment variable LOOM_LOG_LEVEL: expected DEBUG, "
                                     "INFO, WARN or ERROR, got '") +
                         v + "'");
}

const bool kLogTunablesChecked = RegisterTunableCheck("LOOM_LOG_LEVEL", &CheckLogLevel) &&
                                 RegisterTunableCheck("LOOM_LOG_SUBSYS", &CheckLogSubsys);

LogSettings& Settings() {
  static LogSettings* settings = [] {
    auto* s = new LogSettings();
    if (const char* lv = std::getenv("LOOM_LOG_LEVEL")) {
      for (int l = 0; l <= 3; ++l) {
        if (strcasecmp(lv, LevelName(static_cast<LogLevel>(l))) == 0) s->level = l;
      }
    }
    if (const char* ss = std::getenv("LOOM_LOG_SUBSYS")) {
      unsigned mask = 0;
      std::string list(ss);
      for (unsigned bit = 1; bit <= 128; bit <<= 1) {
        if (list.find(SubsysName(static_cast<LogSubsys>(bit))) != std::string::npos) mask |= bit;
      }
      if (mask != 0) s->subsys_mask = mask;
    }
    return s;
  }();
  return *settings;
}

}  // namespace

bool LogEnabled(LogLevel level, LogSubsys subsys) {
  const LogSettings& s = Settings();
  return static_cast<int>(level) >= s.level.load(std::memory_order_relaxed) &&
         (s.subsys_mask.load(std::memory_order_relaxed) & static_cast<unsigned>(subsys)) != 0;
}

std::string ForUser(const Status& status, LogSubsys subsys) {
  std::string msg = status.message();
  if (!LogEnabled(LogLevel::DEBUG, subsys)) {
    const size_t at = msg.find(" [at ");
    if (at != std::string::npos) msg.erase(at);
  }
  return msg;
}

void SetLogRank(int rank) {
  Settings().rank = rank;
}
void SetLogLevel(LogLevel level) {
  Settings().level = static_cast<int>(level);
}

void EmitLog(LogLevel level, LogSubsys subsys, std::string_view message) {
  LogSettings& s = Settings();
  std::string line;
  int rank = s.rank.load();
  line += rank >= 0 ? "[loom " + std::to_string(rank) + "] " : "[loom] ";
  line += LevelName(level);
  line += ' ';
  line += SubsysName(subsys);
  line += ' ';
  line += message;
  line += '\n';
  std::lock_guard<std::mutex> lock(s.mu);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace loom
