// The MPI communication thread: starts queued calls in issue order, polls those in flight.
#include "comm/mpi/mpi_engine.h"

#include <chrono>
#include <iterator>
#include <utility>

#include "core/threads.h"

namespace loom {

Status MpiError(int rc, const std::string& what) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, buf, &len);
  return Internal(what + ": " + std::string(buf, static_cast<size_t>(len)));
}

MpiEngine::MpiEngine(std::shared_ptr<RankContext> ctx)
    : ctx_(std::move(ctx)), thread_([this] { Run(); }) {}

MpiEngine::~MpiEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void MpiEngine::Submit(Op op) {
  if (ctx_->Abandoned()) {  // the thread may be blocked in the abandoned call: fail here
    op.call->Reject(ctx_->NotStarted(op.call->what()));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(op));
  }
  cv_.notify_one();
}

// After an abandonment: fail what was queued, and cancel the posted receives so that MPI writes
// no more into their buffers (sends only read theirs and are left; the job is aborted).
void MpiEngine::Abandon(std::deque<Op>* fresh, std::vector<Op>* inflight) {
  for (Op& op : *fresh) op.call->Reject(ctx_->NotStarted(op.call->what()));
  fresh->clear();
  for (Op& op : *inflight) {
    if (op.cancel) {
      MPI_Cancel(&op.request);
      MPI_Request_free(&op.request);
    }
    op.call->Complete(ctx_->AbandonedError(op.call->what()));
  }
  inflight->clear();
}

bool MpiEngine::StartAll(std::deque<Op>* fresh, std::vector<Op>* inflight) {
  for (size_t k = 0; k < fresh->size(); ++k) {
    Op& op = (*fresh)[k];
    if (!op.call->Enter()) {  // given up while the previous call blocked (op k is failed)
      std::deque<Op> rest(std::make_move_iterator(fresh->begin() + static_cast<long>(k + 1)),
                          std::make_move_iterator(fresh->end()));
      fresh->resize(k);
      Abandon(&rest, inflight);
      return false;
    }
    const int rc = op.start(&op.request);
    op.call->Leave();
    if (rc != MPI_SUCCESS) {
      op.call->Complete(MpiError(rc, op.call->what()));
    } else if (op.request == MPI_REQUEST_NULL) {
      op.call->Complete(Status::Ok());  // a blocking collective, already done
    } else {
      inflight->push_back(std::move(op));
    }
  }
  return true;
}

bool MpiEngine::Poll(std::vector<Op>* inflight) {
  bool progressed = false;
  for (size_t i = 0; i < inflight->size();) {
    Op& op = (*inflight)[i];
    int flag = 0;
    const int rc = MPI_Test(&op.request, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || flag) {
      op.call->Complete(rc == MPI_SUCCESS ? Status::Ok() : MpiError(rc, op.call->what()));
      op = std::move(inflight->back());
      inflight->pop_back();
      progressed = true;
    } else {
      ++i;
    }
  }
  return progressed;
}

void MpiEngine::Run() {
  SetThreadName("loom-comm");
  std::vector<Op> inflight;
  int idle_polls = 0;
  for (;;) {
    std::deque<Op> fresh;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (inflight.empty()) {
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      } else if (idle_polls > 64) {
        // Nothing progressed lately: poll less often, but wake at once for new work.
        cv_.wait_for(lock, std::chrono::microseconds(50), [&] { return stop_ || !queue_.empty(); });
      }
      if (stop_) return;  // owners wait for their calls before destroying the backend
      fresh.swap(queue_);
    }
    if (ctx_->Abandoned()) {
      Abandon(&fresh, &inflight);
      continue;
    }
    const bool started = !fresh.empty();
    if (!StartAll(&fresh, &inflight)) continue;
    const bool progressed = Poll(&inflight) || started;
    idle_polls = progressed ? 0 : idle_polls + 1;
    if (!progressed && idle_polls <= 64) std::this_thread::yield();
  }
}

}  // namespace loom
