// Per-call trace of communication, one layer shared by every backend: each call leaves one record
// (op, group, sequence number, bytes, dtype, peer, tag; enqueue, start and end times; the time its
// caller waited). Records are written by the communicator front (comm/call.h), never by a
// backend, so no backend can skip them; backends only report start and end through the call.
//
// A backend keeps one CallTrace per rank (per process with MPI), in two parts:
//   - the open calls: issued, not yet closed (still running, or finished and not yet waited for);
//   - a ring of closed records, in the order they closed. A call closes when its caller's first
//     wait returns (with end_ns = 0 when it had not finished by the deadline: what a hang
//     detector looks for), or, when its handle is dropped without a wait, once both the handle
//     is gone and the call has finished.
// The worker reads it once per step with a cursor (Read): the records closed since its last read
// and the calls open now. Summaries per (op, group) are computed from the records
// (SummariseCalls), not kept instead of them. It feeds the overlap measurement (time compute
// waited vs time communication ran) and the coordinator's anomaly detector. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor.h"

namespace loom {

enum class CommOp { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kSend, kRecv, kBarrier };
const char* CommOpName(CommOp op);  // "all_reduce", ...

struct TraceRecord {
  CommOp op = CommOp::kBarrier;
  std::string group;  // communicator name, e.g. "dp" or "tp"
  uint64_t seq = 0;   // per-communicator sequence number on this rank (0, 1, ...)
  // A collective: its index among the collectives of its communicator on this rank, the same on
  // every member (sends and receives are not counted: the two ends count differently).
  uint64_t collective_seq = 0;
  int group_root = -1;  // the group's first member (world rank): tells apart groups of one name
  // all_reduce, broadcast, send, recv: the buffer; reduce_scatter: its input; all_gather: its
  // output; barrier: 0.
  int64_t bytes = 0;
  DType dtype = DType::kF32;
  int peer = -1;  // world rank: the peer of a send/recv, the root of a broadcast; else -1
  int tag = -1;   // send/recv: the message tag; else -1
  // Steady clock (NowNs). start = end for a call refused or never started; end = 0 for one that
  // had not finished when it closed (or is still open).
  int64_t enqueue_ns = 0, start_ns = 0, end_ns = 0;
  int64_t wait_ns = 0;        // time the caller spent blocked in the wait that closed the record
  int64_t wait_start_ns = 0;  // when that wait began (0: none yet)
  bool main_thread_wait = false;  // that wait was on the thread set by SetMainThread
};

// A communicator group as registered with its rank's trace: name and members (world ranks).
struct TraceGroup {
  std::string name;
  std::vector<int> members;
};

// What a rank is doing now (CallTrace::Live), for the live progress beat.
struct TraceLive {
  // Its caller waits (the longest-waiting wait) since `since_ns`, on `call`: the call waited on,
  // or, when that has not started, the call the backend is in ahead of it.
  bool blocked = false;
  TraceRecord call;
  int64_t since_ns = 0;
  // Per group (name, first member): the collectives issued on it so far.
  std::map<std::pair<std::string, int>, uint64_t> issued;
};

// A fixed-size ring of records: the newest `capacity` are kept. Thread-safe.
class TraceRing {
 public:
  explicit TraceRing(size_t capacity = 4096) : capacity_(capacity) {}
  void Add(const TraceRecord& r);
  // Records in insertion order (the oldest first); at most `capacity` of them.
  std::vector<TraceRecord> Snapshot() const;
  void Clear();
  // Records ever added (the index the next one gets).
  uint64_t total() const;
  // Records from index `from` on, the oldest first; *lost: how many of those were overwritten
  // (or cleared) already.
  std::vector<TraceRecord> Since(uint64_t from, uint64_t* lost) const;

 private:
  mutable std::mutex mu_;
  size_t capacity_;
  std::vector<TraceRecord> ring_;  // GUARDED_BY(mu_)
  size_t next_ = 0;                // GUARDED_BY(mu_): slot of the next record once full
  uint64_t total_ = 0;             // GUARDED_BY(mu_)
};

// Where a reader is in a CallTrace: the index of the next closed record it has not read.
struct TraceCursor {
  uint64_t next = 0;
};

// One read of a CallTrace.
struct TraceRead {
  std::vector<TraceRecord> records;  // closed since the cursor, in the order they closed
  std::vector<TraceRecord> open;     // open now, in issue order (end_ns = 0: still running)
  uint64_t lost = 0;                 // closed since the cursor, but overwritten before this read
};

class CommCall;

// The trace of one rank of a backend (Backend::trace()).
class CallTrace {
 public:
  explicit CallTrace(size_t capacity = 4096) : ring_(capacity) {}
  CallTrace(const CallTrace&) = delete;
  CallTrace& operator=(const CallTrace&) = delete;

  // The calls since the last read through `cursor`, which moves past the records returned.
  TraceRead Read(TraceCursor* cursor) const;
  // A cursor past every record closed so far: reading it returns what closes from now on.
  TraceCursor End() const { return {ring_.total()}; }
  // The closed records still in the ring, oldest first.
  std::vector<TraceRecord> Snapshot() const { return ring_.Snapshot(); }
  // Forgets the closed records (open calls stay).
  void Clear() { ring_.Clear(); }
  // The calls open now, in issue order.
  std::vector<TraceRecord> Open() const;
  // Where the rank is: blocked on a call or not, and what it has issued.
  TraceLive Live() const;
  // Groups, as communicators register them (Communicator's constructor). Registered groups in
  // order; a second registration of the same (name, members) is ignored.
  void AddGroup(const std::string& name, const std::vector<int>& members);
  std::vector<TraceGroup> Groups() const;
  // The thread whose waits are the rank's (the trainer's): waits on other threads (snapshots,
  // checkpoint votes) happen beside its compute, not instead of it.
  void SetMainThread(std::thread::id id);

 private:
  // Written only by the calls themselves (comm/call.h).
  friend class CommCall;
  uint64_t Open(TraceRecord r);  // at enqueue; returns the call's id
  void Started(uint64_t id, int64_t ns);
  void Ended(uint64_t id, int64_t ns);
  void Waiting(uint64_t id, int64_t ns);  // the caller starts to wait on it
  // Moves the record to the ring; `finished` false leaves end_ns = 0.
  void Close(uint64_t id, int64_t wait_ns, bool finished);

  mutable std::mutex mu_;
  std::map<uint64_t, TraceRecord> open_;                    // GUARDED_BY(mu_), by id = issue order
  uint64_t next_id_ = 0;                                    // GUARDED_BY(mu_)
  std::map<std::pair<std::string, int>, uint64_t> issued_;  // GUARDED_BY(mu_)
  std::vector<TraceGroup> groups_;                          // GUARDED_BY(mu_)
  std::thread::id main_thread_;                             // GUARDED_BY(mu_)
  TraceRing ring_;
};

// Totals of the finished calls (end_ns != 0) of one (op, group).
struct CommSummary {
  std::string op, group;
  int64_t count = 0, bytes = 0;
  double busy_s = 0;  // sum of end - start
  double wait_s = 0;  // sum of the callers' waits
  double max_s = 0;   // the longest end - start
};
// One summary per (op, group) of `records`, ordered by op name, then group.
std::vector<CommSummary> SummariseCalls(const std::vector<TraceRecord>& records);

// Steady clock, in ns: the clock of every trace time.
int64_t NowNs();

}  // namespace loom
