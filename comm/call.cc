// The call shared by every backend: its trace record, waits with deadlines, the abandonment and
// the errors that name the call.
#include "comm/call.h"

#include <algorithm>
#include <utility>

#include "core/fault_point.h"

namespace loom {
namespace {

// How often a waiter checks whether its unstarted operation was abandoned (CommCall::Wait).
constexpr std::chrono::milliseconds kAbandonPoll{100};

}  // namespace

Status RankContext::NotStarted(const std::string& what) const {
  return FailedPrecondition(what + " was not started: " + AbandonedWhat() +
                            " passed its deadline on this rank before it");
}

Status RankContext::AbandonedError(const std::string& what) const {
  return FailedPrecondition(what + " was abandoned: " + AbandonedWhat() +
                            " passed its deadline on this rank");
}

std::string RankContext::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

void RankContext::Cancel(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_.load()) return;
    cancel_reason_ = why;
    cancelled_.store(true);
  }
  Abandon("the job's stop (" + why + ")");
}

std::string RankContext::CancelReason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancel_reason_;
}

void RankContext::Abandon(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (abandoned_.load()) return;
  abandoned_what_ = what;
  abandoned_.store(true);
}

std::string RankContext::AbandonedWhat() const {
  std::lock_guard<std::mutex> lock(mu_);
  return abandoned_what_;
}

bool RankContext::Enter(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (abandoned_.load()) return false;
  current_ = what;
  return true;
}

void RankContext::Leave() {
  std::lock_guard<std::mutex> lock(mu_);
  current_.clear();
}

CommCall::CommCall(std::shared_ptr<RankContext> ctx, CallSpec spec, TraceRecord rec,
                   std::string what, Deadline deadline)
    : ctx_(std::move(ctx)),
      spec_(spec),
      what_(std::move(what)),
      deadline_(deadline),
      enqueue_ns_(rec.enqueue_ns),
      bytes_(rec.bytes),
      peer_world_(rec.peer) {
  trace_id_ = ctx_->trace().Open(std::move(rec));
}

CommCall::~CommCall() {
  std::lock_guard<std::mutex> lock(mu_);
  CloseLocked(0, done_);
}

bool CommCall::Enter() {
  // Lock order: the rank's lock, then the call's (Wait never holds the call's while taking the
  // rank's).
  if (!ctx_->Enter(what_)) {
    Reject(ctx_->NotStarted(what_));
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);  // a timed-out waiter reads started_
  started_ = true;
  ctx_->trace().Started(trace_id_, NowNs());
  FaultContext fc{FaultSite::kCommStart, ctx_->world_rank()};
  fc.where = CommOpName(spec_.op);
  fc.peer = peer_world_;
  fc.bytes = bytes_;
  fc.data = this;
  FaultPoint(fc);  // fault/inject.h: a slow link, a rank stopped inside a call
  return true;
}

void CommCall::Leave() {
  ctx_->Leave();
}

void CommCall::Complete(Status st) {
  CompleteAt(std::move(st), NowNs());
}

void CommCall::CompleteAt(Status st, int64_t end_ns) {
  {
    FaultContext fc{FaultSite::kCommEnd, ctx_->world_rank()};
    fc.data = this;
    FaultPoint(fc);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return;
  ctx_->trace().Ended(trace_id_, end_ns);
  status_ = std::move(st);
  done_ = true;
  if (released_) CloseLocked(0, true);
  cv_.notify_all();
}

void CommCall::CompleteTimed(Status st, int64_t start_ns, int64_t end_ns) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) ctx_->trace().Started(trace_id_, start_ns);
  }
  CompleteAt(std::move(st), end_ns);
}

void CommCall::Reject(Status st) {
  const int64_t now = NowNs();
  {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = true;  // start = end: no time in flight
    ctx_->trace().Started(trace_id_, now);
  }
  CompleteAt(std::move(st), now);
}

bool CommCall::Done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void CommCall::Release() {
  std::lock_guard<std::mutex> lock(mu_);
  released_ = true;
  if (done_) CloseLocked(0, true);
}

void CommCall::CloseLocked(int64_t wait_ns, bool finished) {
  if (closed_) return;
  closed_ = true;
  ctx_->trace().Close(trace_id_, wait_ns, finished);
}

Status CommCall::Wait(Deadline deadline) {
  Status st = WaitTraced(deadline);
  FaultPoint({FaultSite::kCommWaited, ctx_->world_rank()});
  return st;
}

Status CommCall::WaitTraced(Deadline deadline) {
  const int64_t t0 = NowNs();
  bool finished = false, never_started = false, started = false, cancelled = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!closed_) ctx_->trace().Waiting(trace_id_, t0);
    // After an abandonment a call that has not started never will, and the backend may be
    // blocked in the abandoned call, unable to fail it: its waiter looks every kAbandonPoll
    // rather than wait out its deadline.
    for (;;) {
      const Deadline slice = std::min(deadline, Clock::now() + kAbandonPoll);
      finished = cv_.wait_until(lock, slice, [&] { return done_; });
      if (finished || Clock::now() >= deadline) break;
      if (ctx_->Cancelled()) {
        cancelled = true;
        break;
      }
      if (!started_ && ctx_->Abandoned()) {
        never_started = true;
        break;
      }
    }
    if (never_started && !closed_) {  // not a hang: no time in flight
      const int64_t now = NowNs();
      ctx_->trace().Started(trace_id_, now);
      ctx_->trace().Ended(trace_id_, now);
    }
    // A call that had not finished keeps end = 0: what the hang detector looks for.
    CloseLocked(NowNs() - t0, finished || never_started);
    if (finished) return status_;
    started = started_;
  }
  if (cancelled) return FailedPrecondition(what_ + " was stopped: " + ctx_->CancelReason());
  if (never_started) return ctx_->NotStarted(what_);
  return TimedOut(started);
}

Status CommCall::TimedOut(bool started) const {
  const int64_t waited_ms = (NowNs() - enqueue_ns_) / 1000000;
  ctx_->Abandon(what_);
  std::string why = "a member is hung or dead";
  if (!started) {  // queued behind a call that has not returned
    const std::string current = ctx_->Current();
    if (!current.empty()) why = "not started: this rank is still in " + current;
  }
  return DeadlineExceeded(what_ + " (" + std::to_string(bytes_) + " bytes" +
                          (peer_world_ >= 0 ? ", peer " + std::to_string(peer_world_) : "") +
                          ") did not complete within " + std::to_string(waited_ms) +
                          " ms (world rank " + std::to_string(ctx_->world_rank()) + " waiting; " +
                          why + ")");
}

}  // namespace loom
