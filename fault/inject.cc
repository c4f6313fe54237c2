// The fault-injection table: parsing and validating LOOM_FAULT_*, and the handler that acts on it.
#include "fault/inject.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "core/fault_point.h"

extern char** environ;

namespace loom {
namespace {

// What the variables asked for; written once by InstallFaultInjection, read by the handler.
struct FaultPlan {
  int hang_rank = -1;
  int64_t hang_step = 0, hang_ms = -1;  // hang_ms -1: for good
  int kill_rank = -1, kill_at = 0;
  bool trace_crash_points = false;
  int64_t slow_restore_ms = 0;
  int64_t interrupt_at = 0;
};
FaultPlan g_plan;
std::atomic<int> g_crash_points{0};
std::atomic<int64_t> g_interrupt_checks{0};

const std::vector<FaultVariable> kVariables = {
    {"LOOM_FAULT_HANG", "RANK:STEP[:MS]",
     "world rank RANK stops participating before step STEP, for good or for MS ms"},
    {"LOOM_FAULT_CKPT_KILL", "RANK:N",
     "world rank RANK kills itself at the N-th checkpoint crash point it reaches"},
    {"LOOM_FAULT_CKPT_TRACE", "0|1", "every rank prints each checkpoint crash point it reaches"},
    {"LOOM_FAULT_CKPT_SLOW_MS", "MS",
     "every rank waits MS ms before looking for a checkpoint to resume"},
    {"LOOM_FAULT_INTERRUPT_AT", "N", "the N-th interrupt check of a tool raises SIGINT"},
};

// The value's colon-separated whole numbers, each at least `min`; `want` of them, or want + 1
// when the last is optional.
bool ParseNumbers(std::string_view s, size_t want, bool last_optional, int64_t min,
                  std::vector<int64_t>* out) {
  out->clear();
  while (true) {
    const size_t colon = s.find(':');
    const std::string_view part = s.substr(0, colon);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || v < min) {
      return false;
    }
    out->push_back(v);
    if (colon == std::string_view::npos) break;
    s = s.substr(colon + 1);
  }
  return out->size() == want || (last_optional && out->size() == want + 1);
}

Status Bad(const FaultVariable& v, std::string_view value) {
  return InvalidArgument("environment variable " + std::string(v.name) + ": expected " + v.syntax +
                         " (" + v.meaning + "), got '" + std::string(value) + "'");
}

// Parses one variable of the table into the plan.
Status Parse(const FaultVariable& v, std::string_view value, FaultPlan* plan) {
  const std::string_view name(v.name);
  std::vector<int64_t> n;
  if (name == "LOOM_FAULT_HANG") {
    if (!ParseNumbers(value, 2, true, 0, &n) || n[1] < 1) return Bad(v, value);
    plan->hang_rank = static_cast<int>(n[0]);
    plan->hang_step = n[1];
    plan->hang_ms = n.size() > 2 ? n[2] : -1;
  } else if (name == "LOOM_FAULT_CKPT_KILL") {
    if (!ParseNumbers(value, 2, false, 0, &n) || n[1] < 1) return Bad(v, value);
    plan->kill_rank = static_cast<int>(n[0]);
    plan->kill_at = static_cast<int>(n[1]);
  } else if (name == "LOOM_FAULT_CKPT_TRACE") {
    if (value != "0" && value != "1") return Bad(v, value);
    plan->trace_crash_points = value == "1";
  } else if (name == "LOOM_FAULT_CKPT_SLOW_MS") {
    if (!ParseNumbers(value, 1, false, 0, &n)) return Bad(v, value);
    plan->slow_restore_ms = n[0];
  } else if (name == "LOOM_FAULT_INTERRUPT_AT") {
    if (!ParseNumbers(value, 1, false, 1, &n)) return Bad(v, value);
    plan->interrupt_at = n[0];
  }
  return Status::Ok();
}

void CrashPoint(const FaultContext& ctx) {
  const FaultPlan& p = g_plan;
  if (p.kill_rank != ctx.rank && !p.trace_crash_points) return;
  const int n = g_crash_points.fetch_add(1) + 1;
  if (p.trace_crash_points) {
    std::fprintf(stderr, "loom: checkpoint crash point %d on rank %d (%s)\n", n, ctx.rank,
                 ctx.where);
  }
  if (p.kill_rank == ctx.rank && n == p.kill_at) {
    std::fprintf(stderr, "loom: fault injection: rank %d killed at crash point %d (%s)\n", ctx.rank,
                 n, ctx.where);
    std::fflush(stderr);
    ::kill(::getpid(), SIGKILL);
  }
}

void BeforeStep(const FaultContext& ctx) {
  const FaultPlan& p = g_plan;
  if (p.hang_rank != ctx.rank || p.hang_step != ctx.step) return;
  std::fprintf(stderr, "loom: fault injection: rank %d stops participating at step %lld%s\n",
               ctx.rank, static_cast<long long>(ctx.step),
               p.hang_ms >= 0 ? (" for " + std::to_string(p.hang_ms) + " ms").c_str() : "");
  if (p.hang_ms >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(p.hang_ms));
  } else {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // until the job is killed
  }
}

void OnFaultPoint(const FaultContext& ctx) {
  switch (ctx.site) {
    case FaultSite::kBeforeStep:
      BeforeStep(ctx);
      break;
    case FaultSite::kCheckpointCrashPoint:
      CrashPoint(ctx);
      break;
    case FaultSite::kCheckpointRestore:
      if (g_plan.slow_restore_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(g_plan.slow_restore_ms));
      }
      break;
    case FaultSite::kInterruptCheck:
      if (g_plan.interrupt_at > 0 && g_interrupt_checks.fetch_add(1) + 1 == g_plan.interrupt_at) {
        ::raise(SIGINT);
      }
      break;
  }
}

}  // namespace

const std::vector<FaultVariable>& FaultVariables() {
  return kVariables;
}

Status InstallFaultInjection() {
  constexpr std::string_view kPrefix = "LOOM_FAULT_";
  FaultPlan plan;
  bool any = false;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.substr(0, kPrefix.size()) != kPrefix) continue;
    const size_t eq = entry.find('=');
    const std::string_view name = entry.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : entry.substr(eq + 1);
    const FaultVariable* row = nullptr;
    for (const FaultVariable& v : kVariables) {
      if (name == v.name) row = &v;
    }
    if (row == nullptr) {
      std::string known;
      for (const FaultVariable& v : kVariables)
        known += (known.empty() ? "" : ", ") + std::string(v.name);
      return InvalidArgument("environment variable " + std::string(name) +
                             ": not a fault-injection variable (expected one of " + known + ")");
    }
    if (value.empty()) continue;  // set but empty: off, as an unset one
    LOOM_RETURN_IF_ERROR(Parse(*row, value, &plan));
    any = true;
  }
  g_plan = plan;
  SetFaultHandler(any ? OnFaultPoint : nullptr);
  return Status::Ok();
}

}  // namespace loom
