// Hangs, live from the beats: who the longest-blocked rank waits for, followed to the end of the
// wait-for chain (detector.h).
#include <algorithm>
#include <cstdio>
#include <set>

#include "fault/detector/detector.h"

namespace loom::detect {
namespace {

// Calls issued on `group` by beat `b` (its next sequence number), or -1 when none.
int64_t Issued(const Beat& b, const std::string& group) {
  auto it = b.issued.find(group);
  return it == b.issued.end() ? -1 : static_cast<int64_t>(it->second);
}

std::string Call(const std::string& op, const std::string& group, uint64_t seq, int peer = -1) {
  if (peer >= 0) return op + (op == "send" ? " to rank " : " from rank ") + std::to_string(peer);
  return op + " #" + std::to_string(seq) + " on group " + group;
}

std::string CallOf(const Beat& b) {
  return Call(b.op, b.group, b.seq, b.peer);
}

std::string Ranks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

std::vector<int> Detector::Members(const std::string& group, const std::vector<Beat>& beats) const {
  auto it = groups_.find(group);
  if (it != groups_.end()) return it->second;
  std::vector<int> m;
  for (const Beat& b : beats) {
    if (Issued(b, group) >= 0 || (b.blocked && b.group == group)) m.push_back(b.rank);
  }
  return m;
}

std::optional<Verdict> Detector::OnBeats(const std::vector<Beat>& beats, double now,
                                         double step_s) {
  const double limit = std::max(c_.hang_min_s, c_.hang_steps * step_s);
  auto heard = [&](const Beat& b) { return b.received_s >= 0; };
  // When a rank last spoke: when it sent its latest message, else when that was read.
  auto spoke = [](const Beat& b) { return b.sent_s >= 0 ? b.sent_s : b.received_s; };
  double last_read = -1, last_spoke = -1;
  for (const Beat& b : beats) {
    if (!heard(b)) continue;
    last_read = std::max(last_read, b.received_s);
    last_spoke = std::max(last_spoke, spoke(b));
  }
  // Nothing read for stale_s: the coordinator is what was held up, not every rank at once.
  if (last_read < 0 || now - last_read > c_.stale_s) return std::nullopt;
  // Silent: not read for stale_s, and its latest message sent stale_s before another rank's. A
  // coordinator short of CPU time (measured under srun beside busy ranks on the 2-vCPU VM) reads
  // the ranks' messages seconds late and one by one: by when they were read alone, a healthy
  // rank whose message it had yet to read was named hung ("no beat for 2-9 s").
  auto stale = [&](const Beat& b) {
    return heard(b) && now - b.received_s > c_.stale_s && last_spoke - spoke(b) > c_.stale_s;
  };
  // The longest-blocked rank that is itself alive.
  const Beat* waiter = nullptr;
  for (const Beat& b : beats) {
    if (!heard(b) || stale(b) || !b.blocked || now - b.blocked_since_s <= limit) continue;
    if (waiter == nullptr || b.blocked_since_s < waiter->blocked_since_s) waiter = &b;
  }
  bool io = false;
  // (A silent rank's last beat may say it was saving: it is hung all the same.)
  for (const Beat& b : beats) io = io || (heard(b) && !stale(b) && b.io);
  if (waiter == nullptr || io) {
    if (waiter == nullptr) hang_alarmed_ = false;
    return std::nullopt;
  }
  if (hang_alarmed_) return std::nullopt;
  const double waited = now - waiter->blocked_since_s;
  auto beat_of = [&](int r) -> const Beat* {
    return r >= 0 && r < static_cast<int>(beats.size()) ? &beats[r] : nullptr;
  };
  // Who is held up: the live ranks blocked longer than the limit.
  std::vector<int> waiting;
  for (const Beat& b : beats) {
    if (b.blocked && !stale(b) && now - b.blocked_since_s > limit) waiting.push_back(b.rank);
  }
  Verdict v;
  v.kind = AnomalyKind::kHang;
  v.waiting = waiting;
  for (const Beat& b : beats) v.step = std::max(v.step, b.step);
  std::set<int> visited;
  const Beat* cur = waiter;
  char buf[64];
  for (;;) {
    visited.insert(cur->rank);
    if (cur->peer >= 0) {  // a send or receive: only its peer can be holding it up
      const Beat* p = beat_of(cur->peer);
      if (p == nullptr || !heard(*p)) return std::nullopt;
      if (stale(*p)) {
        v.rank = p->rank;
        v.stopped = true;
        v.in_compute = !p->blocked;
        v.op = cur->op, v.group = cur->group, v.seq = cur->seq;
        std::snprintf(buf, sizeof(buf), "%.1f", now - p->received_s);
        v.line = RankName(v.rank) + " hung: it stopped responding (no beat for " + buf + " s) " +
                 (p->blocked ? "inside " + CallOf(*p) : std::string("while computing"));
        break;
      }
      if (!p->blocked || visited.count(p->rank)) {
        if (waited <= c_.compute_hang_s) return std::nullopt;
        v.rank = p->rank;
        v.in_compute = !p->blocked;
        v.op = cur->op, v.group = cur->group, v.seq = cur->seq;
        std::snprintf(buf, sizeof(buf), "%.0f", waited);
        v.line = p->blocked
                     ? "ranks " + std::to_string(cur->rank) + " and " + std::to_string(p->rank) +
                           " are stuck in communication with "
                           "each other for " +
                           buf + " s (" + CallOf(*cur) + ", " + CallOf(*p) + ")"
                     : RankName(v.rank) + " hung in compute: rank " + std::to_string(cur->rank) +
                           " has waited " + buf + " s in its " + CallOf(*cur);
        break;
      }
      cur = p;
      continue;
    }
    const std::vector<int> members = Members(cur->group, beats);
    std::vector<const Beat*> absent;  // members that have not issued the call
    for (int m : members) {
      const Beat* b = beat_of(m);
      if (b == nullptr || m == cur->rank || !heard(*b)) continue;
      if (Issued(*b, cur->group) <= static_cast<int64_t>(cur->seq)) absent.push_back(b);
    }
    const std::string call = CallOf(*cur);
    const Beat* culprit = nullptr;
    for (const Beat* b : absent) {
      if (stale(*b)) culprit = b;
    }
    if (culprit != nullptr) {  // stopped (or gone) before entering the call
      v.rank = culprit->rank;
      v.stopped = true;
      v.in_compute = !culprit->blocked;
      v.op = cur->op, v.group = cur->group, v.seq = cur->seq;
      std::snprintf(buf, sizeof(buf), "%.1f", now - culprit->received_s);
      v.line = RankName(v.rank) + " hung: it stopped responding (no beat for " + buf +
               " s) before entering " + call +
               (culprit->blocked ? " (it was waiting in " + CallOf(*culprit) + ")"
                                 : " (it was computing)");
      break;
    }
    if (!absent.empty()) {
      const Beat* next = nullptr;
      for (const Beat* b : absent) {
        if (!b->blocked) next = b;
      }
      if (next != nullptr) {  // computing while the others wait
        if (waited <= c_.compute_hang_s) return std::nullopt;
        v.rank = next->rank;
        v.in_compute = true;
        v.op = cur->op, v.group = cur->group, v.seq = cur->seq;
        std::snprintf(buf, sizeof(buf), "%.0f", waited);
        v.line = RankName(v.rank) + " hung in compute: it has not entered " + call + " for " + buf +
                 " s";
        break;
      }
      next = absent.front();  // blocked elsewhere: follow it
      if (visited.count(next->rank)) {
        // A cycle of live ranks: a deadlock, or a member about to go silent (its last beat
        // is younger than stale_s): named only once it has lasted.
        if (waited <= c_.compute_hang_s) return std::nullopt;
        v.rank = next->rank;
        v.op = next->op, v.group = next->group, v.seq = next->seq;
        v.line = "ranks " + Ranks(std::vector<int>(visited.begin(), visited.end())) +
                 " are deadlocked: each waits in a call another has not entered (rank " +
                 std::to_string(next->rank) + " in " + CallOf(*next) + ")";
        break;
      }
      cur = next;
      continue;
    }
    // Every member has issued the call: one that stopped inside it, or a stuck transport.
    for (int m : members) {
      const Beat* b = beat_of(m);
      if (b != nullptr && stale(*b)) culprit = b;
    }
    v.op = cur->op, v.group = cur->group, v.seq = cur->seq;
    if (culprit != nullptr) {
      v.rank = culprit->rank;
      v.stopped = true;
      std::snprintf(buf, sizeof(buf), "%.1f", now - culprit->received_s);
      v.line = RankName(v.rank) + " hung: it stopped responding (no beat for " + buf +
               " s) inside " + call;
      break;
    }
    // A member held up elsewhere (its backend in another call ahead of this one): follow it.
    const Beat* elsewhere = nullptr;
    for (int m : members) {
      const Beat* b = beat_of(m);
      if (b != nullptr && b->blocked && !visited.count(m) &&
          !(b->group == cur->group && b->seq == cur->seq && b->peer == cur->peer)) {
        elsewhere = b;
        break;
      }
    }
    if (elsewhere != nullptr) {
      cur = elsewhere;
      continue;
    }
    if (waited <= c_.compute_hang_s) return std::nullopt;
    v.rank = cur->rank;
    std::snprintf(buf, sizeof(buf), "%.0f", waited);
    v.line = call + " hung in communication with every member inside for " + buf + " s (members " +
             Ranks(members) + "; a stuck transport or link)";
    break;
  }
  if (v.rank >= 0) v.node = NodeOf(v.rank);
  std::vector<int> others;
  for (int r : v.waiting) {
    if (r != v.rank) others.push_back(r);
  }
  v.waiting = others;
  if (!others.empty()) {
    v.line += "; rank" + std::string(others.size() > 1 ? "s " : " ") + Ranks(others) +
              (others.size() > 1 ? " wait" : " waits") + " for it";
  }
  hang_alarmed_ = true;
  return v;
}

}  // namespace loom::detect
