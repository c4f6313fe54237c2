// The tunables registry and the strict reading of integer tunables.
#include "core/tunables.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace loom {
namespace {

struct Entry {
  const char* name;
  IntTunable value;             // when check is null
  Status (*check)() = nullptr;  // a tunable with its own check
};

// Constructed on first use: registrations run during static initialisation, in any order.
struct Registry {
  std::mutex mu;
  std::vector<Entry> entries;  // GUARDED_BY(mu)
};
Registry& TheRegistry() {
  static Registry* r = new Registry();  // never destroyed: read until the process ends
  return *r;
}

}  // namespace

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

IntTunable RegisterTunable(const IntTunable& t) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.entries.push_back({t.name, t, nullptr});
  return t;
}

bool RegisterTunableCheck(const char* name, Status (*check)()) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.entries.push_back({name, IntTunable{name, 0, 0, 0, ""}, check});
  return true;
}

Status CheckTunables() {
  Registry& r = TheRegistry();
  std::vector<Entry> entries;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    entries = r.entries;
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return std::strcmp(a.name, b.name) < 0; });
  for (const Entry& e : entries) {
    if (e.check != nullptr) {
      LOOM_RETURN_IF_ERROR(e.check());
    } else {
      LOOM_RETURN_IF_ERROR(ReadTunable(e.value).status());
    }
  }
  return Status::Ok();
}

}  // namespace loom
