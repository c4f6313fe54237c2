// Per-call trace of collectives and point-to-point transfers: what ran, on which group, how many
// bytes, and when it was enqueued, started and finished. Kept in a fixed-size ring per process;
// it feeds the overlap measurement (time compute waited vs time communication ran) and, later,
// the coordinator's anomaly detector. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace loom {

enum class CommOp { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kSend, kRecv, kBarrier };
const char* CommOpName(CommOp op);

struct TraceRecord {
  CommOp op = CommOp::kBarrier;
  std::string group;  // communicator name, e.g. "dp" or "tp"
  uint64_t seq = 0;   // per-communicator sequence number (same on every member)
  int64_t bytes = 0;
  int peer = -1;                                     // send/recv: group rank of the peer
  int tag = -1;                                      // send/recv: message tag
  int64_t enqueue_ns = 0, start_ns = 0, end_ns = 0;  // steady clock
  int64_t wait_ns = 0;  // time the caller spent blocked in Wait() on this call
};

class TraceRing {
 public:
  explicit TraceRing(size_t capacity = 4096) : capacity_(capacity) {}
  void Add(const TraceRecord& r);
  // Records in insertion order (the oldest first); at most `capacity` of them.
  std::vector<TraceRecord> Snapshot() const;
  void Clear();

 private:
  mutable std::mutex mu_;
  size_t capacity_;
  std::vector<TraceRecord> ring_;  // GUARDED_BY(mu_)
  size_t next_ = 0;                // GUARDED_BY(mu_)
};

int64_t NowNs();

}  // namespace loom
