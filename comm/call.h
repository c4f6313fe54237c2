// The backend side of a communication call, the same for every backend.
//
// The communicator front (communicator.h) checks a call, opens its trace record and hands it to
// the group's transport (GroupTransport::Submit). The backend runs it and reports through the
// call only: Enter (about to start; refused once the rank has given up), Leave, Complete, or
// Reject. The caller waits on it through its CommHandle. The trace record, the deadline, the
// abandonment and the errors that name op, group, members, sequence number and the waiting
// world rank all live here, so no backend can skip tracing or word a timeout differently.
//
// Users of communicators never include this header; backends (comm/mpi/, comm/local/) do.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/trace.h"
#include "core/status.h"

namespace loom {

// What every call of one backend rank shares: its world rank, its default timeout, its trace,
// and the abandonment. Thread-safe.
//
// Abandonment: set by the first wait that passes its deadline. That call may still be running
// inside the backend, so the backend starts nothing more: CommCall::Enter refuses every later
// call, which fails at once naming the abandoned one.
class RankContext {
 public:
  RankContext(int world_rank, std::chrono::milliseconds timeout)
      : world_rank_(world_rank), timeout_(timeout) {}

  int world_rank() const { return world_rank_; }
  std::chrono::milliseconds default_timeout() const { return timeout_; }
  CallTrace& trace() { return trace_; }

  bool Abandoned() const { return abandoned_.load(); }
  // The error of call `what`, never started because of the abandonment.
  Status NotStarted(const std::string& what) const;
  // The error of call `what`, in flight when the rank gave up (a posted receive, cancelled).
  Status AbandonedError(const std::string& what) const;
  // The call the backend is in (between Enter and Leave), "" if none.
  std::string Current() const;
  // The job is being stopped for `why`: every wait of this rank ends (within kAbandonPoll) with
  // an error saying so, and no call starts any more.
  void Cancel(const std::string& why);
  bool Cancelled() const { return cancelled_.load(); }
  std::string CancelReason() const;

 private:
  friend class CommCall;
  void Abandon(const std::string& what);
  std::string AbandonedWhat() const;
  // False (and nothing recorded) once abandoned, checked under the lock Abandon takes, so no
  // call starts after an abandonment.
  bool Enter(const std::string& what);
  void Leave();

  const int world_rank_;
  const std::chrono::milliseconds timeout_;
  CallTrace trace_;
  mutable std::mutex mu_;
  std::atomic<bool> abandoned_{false};
  std::atomic<bool> cancelled_{false};
  std::string cancel_reason_;   // GUARDED_BY(mu_)
  std::string abandoned_what_;  // GUARDED_BY(mu_)
  std::string current_;         // GUARDED_BY(mu_)
};

// What to run. Buffers as the caller gave them (comm/buffer.h); ranks are group ranks.
struct CallSpec {
  CommOp op = CommOp::kBarrier;
  // all_reduce, broadcast: in == out, the buffer (in place); send: in; recv: out;
  // reduce_scatter, all_gather: input and output.
  const void* in = nullptr;
  void* out = nullptr;
  // Elements: of the buffer; per rank for reduce_scatter (its output) and all_gather (its input).
  int64_t count = 0;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;
  ReduceOp reduce = ReduceOp::kSum;
  int peer = -1;           // send/recv: the peer; broadcast: the root
  int tag = -1;            // send/recv
  int rank = 0, size = 1;  // of the caller in its group
};

// One issued call: shared by its handle (the caller), the backend running it and the trace.
class CommCall {
 public:
  // Opens the trace record `rec` (enqueue time set). `what`: "all_reduce #3 on group 'dp' [1, 3]".
  CommCall(std::shared_ptr<RankContext> ctx, CallSpec spec, TraceRecord rec, std::string what,
           Deadline deadline);
  // Closes the record if still open (a backend dropped the call at shutdown).
  ~CommCall();
  CommCall(const CommCall&) = delete;
  CommCall& operator=(const CommCall&) = delete;

  const CallSpec& spec() const { return spec_; }
  const std::string& what() const { return what_; }

  // --- Backend side ---
  // Before the backend starts the call: true, and the start time is recorded, or false once
  // the rank has given up: the call is then failed, unstarted, and must not be started.
  // Between Enter and Leave the call is the one a queued call's timeout names.
  bool Enter();
  void Leave();
  // The call finished (ok or not): records the end and wakes its waiters. Once only.
  void Complete(Status st);
  // As Complete, with the call's start and end as the backend measured them (steady clock, NowNs)
  // instead of when Enter and this were called: a device backend's event times.
  void CompleteTimed(Status st, int64_t start_ns, int64_t end_ns);
  // Refused before starting (start = end): an argument the backend cannot take, a shutdown.
  void Reject(Status st);

  // --- Caller side (CommHandle) ---
  // Until done or `deadline`; on expiry gives the rank up (see RankContext) and names the call.
  Status Wait(Deadline deadline);
  Deadline deadline() const { return deadline_; }
  bool Done() const;
  // The caller's handle is gone: the record closes once the call is done.
  void Release();

 private:
  Status WaitTraced(Deadline deadline);
  void CompleteAt(Status st, int64_t end_ns);
  // Moves the record to the trace's ring once. Holds mu_.
  void CloseLocked(int64_t wait_ns, bool finished);
  Status TimedOut(bool started) const;

  const std::shared_ptr<RankContext> ctx_;
  const CallSpec spec_;
  const std::string what_;
  const Deadline deadline_;
  const int64_t enqueue_ns_, bytes_;
  const int peer_world_;  // for the timeout's message
  uint64_t trace_id_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;   // GUARDED_BY(mu_)
  bool done_ = false;      // GUARDED_BY(mu_)
  bool closed_ = false;    // GUARDED_BY(mu_)
  bool released_ = false;  // GUARDED_BY(mu_)
  Status status_;          // GUARDED_BY(mu_)
};

// A backend's side of one group, owned by its Communicator.
class GroupTransport {
 public:
  virtual ~GroupTransport() = default;
  // Takes `call` to run after every call submitted before it to this backend rank (issue
  // order). Must not block. The backend reports through call->Enter/Leave/Complete or Reject.
  virtual void Submit(std::shared_ptr<CommCall> call) = 0;
  // Takes the sends and receives of one exchange (Communicator::ExchangeAsync), to run as one
  // after every call submitted before them. This default submits them one by one, in order: right
  // for a backend whose sends and receives do not wait for their peers before the next call
  // starts. Must not block.
  virtual void SubmitBatch(const std::vector<std::shared_ptr<CommCall>>& calls) {
    for (const auto& call : calls) Submit(call);
  }
};

}  // namespace loom
