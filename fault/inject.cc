// The fault-injection table: parsing and validating LOOM_FAULT_*, and the handler that acts on it.
#include "fault/inject.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>

#include "core/fault_point.h"
#include "core/threads.h"
#include "fault/snapshot/segment.h"
#include "fault/snapshot/snapshot_view.h"

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
  int kill_snap_rank = -1;
  int64_t kill_snap_step = 0;
  FaultSite kill_snap_site = FaultSite::kBeforeStep;
  std::vector<std::string> drop_nodes;
  int64_t drop_step = 0;
  int delay_rank = -1;
  int64_t delay_ms = 0;
  int corrupt_rank = -1;
  bool corrupt_parity = false;
  int64_t epoch = 0;
  int slow_rank = -1;  // LOOM_FAULT_SLOW
  double slow_factor = 1;
  int64_t slow_step = 1;
  int link_src = -1, link_dst = -1;  // LOOM_FAULT_LINK_DELAY
  double link_factor = 1;
  int64_t link_step = 1;
  int stop_rank = -1;  // LOOM_FAULT_STOP
  int64_t stop_step = 0;
  bool stop_inside = false;
};
struct FaultIdentity {
  int epoch = 0;
  std::string job, node;
};
FaultIdentity g_id;
FaultPlan g_plan;
std::atomic<int> g_crash_points{0};
std::atomic<int64_t> g_interrupt_checks{0};

bool ParseNumbers(std::string_view s, size_t want, bool last_optional, int64_t min,
                  std::vector<int64_t>* out);

const std::vector<FaultVariable> kVariables = {
    {"LOOM_FAULT_HANG", "RANK:STEP[:MS]",
     "world rank RANK stops participating before step STEP, for good or for MS ms"},
    {"LOOM_FAULT_CKPT_KILL", "RANK:N",
     "world rank RANK kills itself at the N-th checkpoint crash point it reaches"},
    {"LOOM_FAULT_CKPT_TRACE", "0|1", "every rank prints each checkpoint crash point it reaches"},
    {"LOOM_FAULT_CKPT_SLOW_MS", "MS",
     "every rank waits MS ms before looking for a checkpoint to resume"},
    {"LOOM_FAULT_INTERRUPT_AT", "N", "the N-th interrupt check of a tool raises SIGINT"},
    {"LOOM_FAULT_KILL", "RANK:STEP[:step|copy|encode|transfer]",
     "world rank RANK kills itself before step STEP, or in its snapshot of step STEP"},
    {"LOOM_FAULT_NODE_DROP", "NODE[,NODE...]:STEP",
     "the nodes NODE fail together before step STEP: the first of their ranks there removes "
     "every named node's snapshot memory, and each of their ranks kills itself"},
    {"LOOM_FAULT_SNAPSHOT_DELAY", "RANK:MS",
     "world rank RANK waits MS ms before each transfer of snapshot fragments"},
    {"LOOM_FAULT_SNAPSHOT_CORRUPT", "RANK[:parity]",
     "a restore finds a byte of old rank RANK's newest snapshot (or parity) flipped"},
    {"LOOM_FAULT_SLOW", "RANK:FACTOR[:STEP]",
     "world rank RANK computes FACTOR times as long between its calls, from step STEP"},
    {"LOOM_FAULT_LINK_DELAY", "SRC:DST:FACTOR[:STEP]",
     "sends from world rank SRC to DST take FACTOR times as long, from step STEP"},
    {"LOOM_FAULT_STOP", "RANK:STEP[:before|inside]",
     "world rank RANK stops itself (SIGSTOP) before step STEP or inside its first collective of "
     "it"},
    {"LOOM_FAULT_EPOCH", "N", "the incarnation of the job the faults act in (default 0)"},
};

// "RANK:...:FACTOR[:STEP]": `ints` whole numbers >= 0, then a factor >= 1, then an optional
// step >= 1.
bool ParseFactor(std::string_view s, size_t ints, std::vector<int64_t>* n, double* factor,
                 int64_t* step) {
  n->clear();
  for (size_t i = 0; i < ints; ++i) {
    const size_t colon = s.find(':');
    if (colon == std::string_view::npos) return false;
    std::vector<int64_t> one;
    if (!ParseNumbers(s.substr(0, colon), 1, false, 0, &one)) return false;
    n->push_back(one[0]);
    s = s.substr(colon + 1);
  }
  const size_t colon = s.find(':');
  const std::string f(s.substr(0, colon));
  char* end = nullptr;
  *factor = std::strtod(f.c_str(), &end);
  if (f.empty() || end != f.c_str() + f.size() || !(*factor >= 1) || *factor > 1000) return false;
  *step = 1;
  if (colon == std::string_view::npos) return true;
  std::vector<int64_t> one;
  if (!ParseNumbers(s.substr(colon + 1), 1, false, 1, &one)) return false;
  *step = one[0];
  return true;
}

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
  } else if (name == "LOOM_FAULT_KILL") {
    // RANK:STEP or RANK:STEP:WHERE
    std::string_view head = value, at = "step";
    const size_t second = value.find(':', value.find(':') + 1);
    if (value.find(':') != std::string_view::npos && second != std::string_view::npos) {
      head = value.substr(0, second);
      at = value.substr(second + 1);
    }
    if (!ParseNumbers(head, 2, false, 0, &n) || n[1] < 1) return Bad(v, value);
    plan->kill_snap_rank = static_cast<int>(n[0]);
    plan->kill_snap_step = n[1];
    if (at == "step") {
      plan->kill_snap_site = FaultSite::kBeforeStep;
    } else if (at == "copy") {
      plan->kill_snap_site = FaultSite::kSnapshotCopy;
    } else if (at == "encode") {
      plan->kill_snap_site = FaultSite::kSnapshotEncode;
    } else if (at == "transfer") {
      plan->kill_snap_site = FaultSite::kSnapshotTransfer;
    } else {
      return Bad(v, value);
    }
  } else if (name == "LOOM_FAULT_NODE_DROP") {
    const size_t colon = value.rfind(':');
    if (colon == 0 || colon == std::string_view::npos ||
        !ParseNumbers(value.substr(colon + 1), 1, false, 1, &n)) {
      return Bad(v, value);
    }
    std::string_view nodes = value.substr(0, colon);
    while (!nodes.empty()) {
      const size_t comma = nodes.find(',');
      if (comma == 0) return Bad(v, value);
      plan->drop_nodes.emplace_back(nodes.substr(0, comma));
      nodes = comma == std::string_view::npos ? std::string_view() : nodes.substr(comma + 1);
    }
    plan->drop_step = n[0];
  } else if (name == "LOOM_FAULT_SNAPSHOT_DELAY") {
    if (!ParseNumbers(value, 2, false, 0, &n)) return Bad(v, value);
    plan->delay_rank = static_cast<int>(n[0]);
    plan->delay_ms = n[1];
  } else if (name == "LOOM_FAULT_SNAPSHOT_CORRUPT") {
    std::string_view rank = value;
    if (value.size() > 7 && value.substr(value.size() - 7) == ":parity") {
      rank = value.substr(0, value.size() - 7);
      plan->corrupt_parity = true;
    }
    if (!ParseNumbers(rank, 1, false, 0, &n)) return Bad(v, value);
    plan->corrupt_rank = static_cast<int>(n[0]);
  } else if (name == "LOOM_FAULT_SLOW") {
    if (!ParseFactor(value, 1, &n, &plan->slow_factor, &plan->slow_step)) return Bad(v, value);
    plan->slow_rank = static_cast<int>(n[0]);
  } else if (name == "LOOM_FAULT_LINK_DELAY") {
    if (!ParseFactor(value, 2, &n, &plan->link_factor, &plan->link_step) || n[0] == n[1]) {
      return Bad(v, value);
    }
    plan->link_src = static_cast<int>(n[0]);
    plan->link_dst = static_cast<int>(n[1]);
  } else if (name == "LOOM_FAULT_STOP") {
    std::string_view head = value, at = "before";
    const size_t second = value.find(':', value.find(':') + 1);
    if (value.find(':') != std::string_view::npos && second != std::string_view::npos) {
      head = value.substr(0, second);
      at = value.substr(second + 1);
    }
    if (!ParseNumbers(head, 2, false, 0, &n) || n[1] < 1 || (at != "before" && at != "inside")) {
      return Bad(v, value);
    }
    plan->stop_rank = static_cast<int>(n[0]);
    plan->stop_step = n[1];
    plan->stop_inside = at == "inside";
  } else if (name == "LOOM_FAULT_EPOCH") {
    if (!ParseNumbers(value, 1, false, 0, &n)) return Bad(v, value);
    plan->epoch = n[0];
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

[[noreturn]] void KillSelf(const std::string& why) {
  std::fprintf(stderr, "loom: fault injection: %s\n", why.c_str());
  std::fflush(stderr);
  ::kill(::getpid(), SIGKILL);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

// The snapshot faults: kills inside a snapshot, the node drop, the delay, all in the planned
// incarnation only (a restarted job must not fail the same way again).
void SnapshotFault(const FaultContext& ctx) {
  const FaultPlan& p = g_plan;
  if (g_id.epoch != p.epoch) return;
  if (ctx.site == p.kill_snap_site && ctx.rank == p.kill_snap_rank &&
      ctx.step == p.kill_snap_step) {
    const char* at = ctx.site == FaultSite::kBeforeStep       ? "before step"
                     : ctx.site == FaultSite::kSnapshotCopy   ? "copying its snapshot of step"
                     : ctx.site == FaultSite::kSnapshotEncode ? "encoding its snapshot of step"
                                                              : "sending its snapshot of step";
    KillSelf("rank " + std::to_string(ctx.rank) + " killed " + at + " " + std::to_string(ctx.step) +
             (*ctx.where ? std::string(" (") + ctx.where + ")" : ""));
  }
  if (ctx.site == FaultSite::kBeforeStep && ctx.step == p.drop_step && !g_id.node.empty() &&
      std::find(p.drop_nodes.begin(), p.drop_nodes.end(), g_id.node) != p.drop_nodes.end()) {
    // The named nodes fail at once: whichever of their ranks gets here first removes all of their
    // memory, since the job stops when that rank dies, perhaps before another node's rank arrives.
    int removed = 0;
    std::string error;
    for (const std::string& node : p.drop_nodes) {
      Result<int> n = RemoveSegments(NodeSegmentPrefix(g_id.job, node));
      if (n.ok()) {
        removed += *n;
      } else if (error.empty()) {
        error = n.status().message();
      }
    }
    KillSelf("node " + g_id.node + " dropped before step " + std::to_string(ctx.step) + " (rank " +
             std::to_string(ctx.rank) + ": " +
             (error.empty() ? std::to_string(removed) + " snapshot segments removed" : error) +
             ")");
  }
  if (ctx.site == FaultSite::kSnapshotTransfer && ctx.rank == p.delay_rank && p.delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(p.delay_ms));
  }
}

// At a restore into the incarnation after the planned one: flips a byte of old rank
// corrupt_rank's newest image (or parity), if this rank took stock of it.
void CorruptAtRestore(const FaultContext& ctx) {
  const FaultPlan& p = g_plan;
  if (p.corrupt_rank < 0 || g_id.epoch != p.epoch + 1 || ctx.data == nullptr) return;
  auto* view = static_cast<SnapshotView*>(ctx.data);
  for (auto& [old_rank, seg] : view->segments) {
    if (old_rank != p.corrupt_rank || seg == nullptr) continue;
    // Every sealed slot: whichever save the restore chooses holds a fragment that fails.
    for (int slot = 0; slot < 2; ++slot) {
      const SlotInfo info = seg->ReadSlot(slot);
      if (!info.valid || info.state < SlotState::kSealed) continue;
      char* byte =
          p.corrupt_parity && seg->geometry().m > 0 ? seg->parity(slot, 0) : seg->image(slot);
      byte[seg->geometry().piece_bytes / 2] ^= 0x5A;
      std::fprintf(stderr,
                   "loom: fault injection: a byte of old rank %d's snapshot of step %lld (%s) "
                   "flipped\n",
                   old_rank, static_cast<long long>(info.step),
                   p.corrupt_parity ? "parity 0" : "piece 0");
    }
  }
}

// The communication faults (slow rank, slow link, stop), in the planned incarnation.
struct CommFaultState {
  std::atomic<int64_t> step{0};  // the step the trainer is in
  std::atomic<bool> stop_armed{false};
  std::mutex mu;
  std::thread::id trainer;              // GUARDED_BY(mu): the thread that runs the steps
  int64_t last_mark_ns = 0;             // GUARDED_BY(mu): the trainer's CPU time at its last call
  std::vector<double> link_s_per_byte;  // GUARDED_BY(mu): the link's recent natural sends
  // GUARDED_BY(mu): the link's sends in flight: when their data was released, their bytes.
  std::map<const void*, std::pair<int64_t, int64_t>> sending;
};
CommFaultState g_comm;

int64_t MonoNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void StopSelf(const std::string& why) {
  std::fprintf(stderr, "loom: fault injection: %s\n", why.c_str());
  std::fflush(stderr);
  ::raise(SIGSTOP);
}

void CommFault(const FaultContext& ctx) {
  const FaultPlan& p = g_plan;
  if (g_id.epoch != p.epoch) return;
  const int64_t step = g_comm.step.load(std::memory_order_relaxed);
  if (ctx.rank == p.slow_rank && step >= p.slow_step &&
      (ctx.site == FaultSite::kCommIssue || ctx.site == FaultSite::kCommWaited)) {
    std::unique_lock<std::mutex> lock(g_comm.mu);
    if (std::this_thread::get_id() != g_comm.trainer) return;
    const int64_t now = ThreadCpuNs();
    if (ctx.site == FaultSite::kCommIssue && g_comm.last_mark_ns > 0) {
      // The work since the trainer's last call takes `factor` times as long: a slower processor
      // is emulated by burning the extra CPU time (a sleep would free the core for the others).
      const int64_t until =
          now + static_cast<int64_t>((p.slow_factor - 1) *
                                     static_cast<double>(now - g_comm.last_mark_ns));
      lock.unlock();
      while (ThreadCpuNs() < until) {
      }
      lock.lock();
    }
    g_comm.last_mark_ns = ThreadCpuNs();
    return;
  }
  if (ctx.rank == p.link_src) {
    std::unique_lock<std::mutex> lock(g_comm.mu);
    if (ctx.site == FaultSite::kCommStart && ctx.peer == p.link_dst && ctx.bytes > 0 &&
        std::strcmp(ctx.where, "send") == 0) {
      // The transfer takes `factor` times as long as the link's sends took before the fault
      // (the median of its natural sends, per byte): the data leaves that much later.
      double extra = 0;
      if (step >= p.link_step) {
        std::vector<double> recent = g_comm.link_s_per_byte;
        if (!recent.empty()) {
          std::nth_element(recent.begin(), recent.begin() + recent.size() / 2, recent.end());
          extra = (p.link_factor - 1) * recent[recent.size() / 2] * static_cast<double>(ctx.bytes);
        }
      }
      lock.unlock();
      if (extra > 0) std::this_thread::sleep_for(std::chrono::duration<double>(extra));
      lock.lock();
      g_comm.sending[ctx.data] = {MonoNs(), ctx.bytes};
    } else if (ctx.site == FaultSite::kCommEnd) {
      auto it = g_comm.sending.find(ctx.data);
      if (it == g_comm.sending.end()) return;
      const double per_byte = static_cast<double>(MonoNs() - it->second.first) * 1e-9 /
                              static_cast<double>(it->second.second);
      g_comm.sending.erase(it);
      // Measured before the fault (or, from step 1, its first sends): the link's own speed.
      std::vector<double>& recent = g_comm.link_s_per_byte;
      if (step < p.link_step || recent.size() < 8) {
        recent.push_back(per_byte);
        if (recent.size() > 64) recent.erase(recent.begin());
      }
    }
  }
  if (ctx.rank == p.stop_rank && p.stop_inside && ctx.site == FaultSite::kCommStart &&
      std::strcmp(ctx.where, "send") != 0 && std::strcmp(ctx.where, "recv") != 0 &&
      g_comm.stop_armed.exchange(false)) {
    StopSelf("rank " + std::to_string(ctx.rank) + " stops itself (SIGSTOP) inside " + ctx.where +
             " in step " + std::to_string(step));
  }
}

void BeforeStep(const FaultContext& ctx) {
  SnapshotFault(ctx);
  g_comm.step.store(ctx.step, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(g_comm.mu);
    g_comm.trainer = std::this_thread::get_id();
  }
  const FaultPlan& p = g_plan;
  if (ctx.rank == p.stop_rank && ctx.step == p.stop_step && g_id.epoch == p.epoch) {
    if (p.stop_inside) {
      g_comm.stop_armed = true;
    } else {
      StopSelf("rank " + std::to_string(ctx.rank) + " stops itself (SIGSTOP) before step " +
               std::to_string(ctx.step));
    }
  }
  if (p.hang_rank != ctx.rank || p.hang_step != ctx.step || g_id.epoch != p.epoch) return;
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
    case FaultSite::kSnapshotCopy:
    case FaultSite::kSnapshotEncode:
    case FaultSite::kSnapshotTransfer:
      SnapshotFault(ctx);
      break;
    case FaultSite::kSnapshotCommitted:
      break;
    case FaultSite::kSnapshotRestore:
      CorruptAtRestore(ctx);
      break;
    case FaultSite::kCommIssue:
    case FaultSite::kCommStart:
    case FaultSite::kCommEnd:
    case FaultSite::kCommWaited:
      CommFault(ctx);
      break;
  }
}

}  // namespace

void SetFaultIdentity(int epoch, const std::string& job_key, const std::string& node) {
  g_id = {epoch, job_key, node};
}

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
