// The per-call trace: open calls by id, closed records in a ring, reads by cursor, summaries.
#include "comm/trace.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace loom {

const char* CommOpName(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce:
      return "all_reduce";
    case CommOp::kReduceScatter:
      return "reduce_scatter";
    case CommOp::kAllGather:
      return "all_gather";
    case CommOp::kBroadcast:
      return "broadcast";
    case CommOp::kSend:
      return "send";
    case CommOp::kRecv:
      return "recv";
    case CommOp::kBarrier:
      return "barrier";
  }
  return "?";
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void TraceRing::Add(const TraceRecord& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ring_.size() < capacity_) {
    ring_.push_back(r);
  } else {
    ring_[next_] = r;
  }
  next_ = (next_ + 1) % capacity_;
  ++total_;
}

std::vector<TraceRecord> TraceRing::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (ring_.size() < capacity_) return ring_;
  std::vector<TraceRecord> out(ring_.begin() + static_cast<std::ptrdiff_t>(next_), ring_.end());
  out.insert(out.end(), ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(next_));
  return out;
}

void TraceRing::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  ring_.clear();
  next_ = 0;
}

uint64_t TraceRing::total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

std::vector<TraceRecord> TraceRing::Since(uint64_t from, uint64_t* lost) const {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t oldest = total_ - ring_.size();  // index of the oldest record kept
  *lost = from < oldest ? oldest - from : 0;
  std::vector<TraceRecord> out;
  for (uint64_t i = std::max(from, oldest); i < total_; ++i) {
    // Until the ring is full, record i sits at slot i - oldest; after, the oldest is at next_.
    const size_t first = ring_.size() < capacity_ ? 0 : next_;
    out.push_back(ring_[(first + static_cast<size_t>(i - oldest)) % ring_.size()]);
  }
  return out;
}

TraceRead CallTrace::Read(TraceCursor* cursor) const {
  TraceRead read;
  {
    std::lock_guard<std::mutex> lock(mu_);  // no call closes between the two parts
    read.records = ring_.Since(cursor->next, &read.lost);
    for (const auto& [id, rec] : open_) read.open.push_back(rec);
  }
  cursor->next += read.lost + read.records.size();
  return read;
}

std::vector<TraceRecord> CallTrace::Open() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TraceRecord> out;
  for (const auto& [id, rec] : open_) out.push_back(rec);
  return out;
}

TraceLive CallTrace::Live() const {
  std::lock_guard<std::mutex> lock(mu_);
  TraceLive live;
  live.issued = issued_;
  for (const auto& [id, rec] : open_) {
    if (rec.wait_start_ns == 0 || (live.blocked && rec.wait_start_ns >= live.since_ns)) continue;
    live.blocked = true;
    live.call = rec;
    live.since_ns = rec.wait_start_ns;
  }
  if (live.blocked && live.call.start_ns == 0) {
    // Waiting on a call still queued behind another the backend is in (e.g. a background
    // thread's): that one is what holds the rank up.
    for (const auto& [id, rec] : open_) {
      if (rec.start_ns != 0 && rec.end_ns == 0) {
        live.call = rec;
        break;
      }
    }
  }
  return live;
}

void CallTrace::AddGroup(const std::string& name, const std::vector<int>& members) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const TraceGroup& g : groups_) {
    if (g.name == name && g.members == members) return;
  }
  groups_.push_back({name, members});
}

void CallTrace::SetMainThread(std::thread::id id) {
  std::lock_guard<std::mutex> lock(mu_);
  main_thread_ = id;
}

std::vector<TraceGroup> CallTrace::Groups() const {
  std::lock_guard<std::mutex> lock(mu_);
  return groups_;
}

uint64_t CallTrace::Open(TraceRecord r) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  if (r.op != CommOp::kSend && r.op != CommOp::kRecv) {
    r.collective_seq = issued_[{r.group, r.group_root}]++;
  }
  open_.emplace(id, std::move(r));
  return id;
}

void CallTrace::Started(uint64_t id, int64_t ns) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(id);
  if (it != open_.end()) it->second.start_ns = ns;
}

void CallTrace::Ended(uint64_t id, int64_t ns) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(id);
  if (it != open_.end()) it->second.end_ns = ns;
}

void CallTrace::Waiting(uint64_t id, int64_t ns) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(id);
  if (it != open_.end() && it->second.wait_start_ns == 0) it->second.wait_start_ns = ns;
}

void CallTrace::Close(uint64_t id, int64_t wait_ns, bool finished) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(id);
  if (it == open_.end()) return;
  TraceRecord& r = it->second;
  r.wait_ns = wait_ns;
  r.main_thread_wait = std::this_thread::get_id() == main_thread_;
  if (!finished) r.end_ns = 0;
  ring_.Add(r);
  open_.erase(it);
}

std::vector<CommSummary> SummariseCalls(const std::vector<TraceRecord>& records) {
  std::map<std::pair<std::string, std::string>, CommSummary> sums;
  for (const TraceRecord& r : records) {
    if (r.end_ns == 0) continue;  // never finished: no busy time to count
    CommSummary& s = sums[{CommOpName(r.op), r.group}];
    s.op = CommOpName(r.op);
    s.group = r.group;
    ++s.count;
    s.bytes += r.bytes;
    const double busy = static_cast<double>(r.end_ns - r.start_ns) * 1e-9;
    s.busy_s += busy;
    s.wait_s += static_cast<double>(r.wait_ns) * 1e-9;
    s.max_s = std::max(s.max_s, busy);
  }
  std::vector<CommSummary> out;
  for (auto& [key, s] : sums) out.push_back(std::move(s));
  return out;
}

}  // namespace loom
