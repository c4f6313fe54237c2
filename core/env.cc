#include "core/env.h"

#include <strings.h>

#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

namespace loom {

Result<int64_t> ReadTunable(const IntTunable& t) {
  const char* v = std::getenv(t.name);
  if (v == nullptr || *v == '\0') return t.fallback;
  const std::string_view s(v);
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || end != s.data() + s.size() || x < t.lo || x > t.hi) {
    return InvalidArgument("environment variable " + std::string(t.name) + ": expected " +
                           t.meaning + ", a whole number from " + std::to_string(t.lo) + " to " +
                           std::to_string(t.hi) + ", got '" + std::string(s) + "'");
  }
  return x;
}

int64_t TunableOr(const IntTunable& t) {
  Result<int64_t> r = ReadTunable(t);
  return r.ok() ? *r : t.fallback;
}

Status CheckTunables() {
  for (const IntTunable* t : {&kThreadsTunable, &kCommTimeoutTunable, &kCkptTimeoutTunable,
                              &kCkptLockWaitTunable, &kAbortGraceTunable}) {
    Result<int64_t> r = ReadTunable(*t);
    if (!r.ok()) return r.status();
  }
  if (const char* v = std::getenv("LOOM_CKPT_DIRECT_IO");
      v != nullptr && *v != '\0' && std::string_view(v) != "0" && std::string_view(v) != "1") {
    return InvalidArgument(std::string("environment variable LOOM_CKPT_DIRECT_IO: expected 0 (no "
                                       "O_DIRECT) or 1 (the default), got '") +
                           v + "'");
  }
  if (const char* v = std::getenv("LOOM_LOG_SUBSYS"); v != nullptr && *v != '\0') {
    // A comma-separated list of subsystems; one that is not known would silently log nothing.
    static constexpr const char* kKnown[] = {"CORE", "DATA", "TRAIN", "COMM",
                                             "CKPT", "CLI",  "COORD"};
    std::string_view rest(v);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view name = rest.substr(0, comma);
      bool known = false;
      for (const char* k : kKnown) known = known || name == k;
      if (!known) {
        return InvalidArgument(
            "environment variable LOOM_LOG_SUBSYS: expected a comma-separated list of CORE, "
            "DATA, TRAIN, COMM, CKPT, CLI, COORD, got '" +
            std::string(v) + "'");
      }
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  if (const char* v = std::getenv("LOOM_LOG_LEVEL"); v != nullptr && *v != '\0') {
    bool known = false;
    for (const char* l : {"DEBUG", "INFO", "WARN", "ERROR"}) known = known || strcasecmp(v, l) == 0;
    if (!known) {
      return InvalidArgument(std::string("environment variable LOOM_LOG_LEVEL: expected DEBUG, "
                                         "INFO, WARN or ERROR, got '") +
                             v + "'");
    }
  }
  return Status::Ok();
}

}  // namespace loom
