// Local backend: one communication thread per rank running its calls in issue order over the
// in-memory world (local_fabric.h).
#include "comm/local/local_backend.h"

#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>
#include <utility>

#include "comm/call.h"
#include "comm/local/local_fabric.h"
#include "core/threads.h"

namespace loom {
namespace {

struct LocalOp {
  std::shared_ptr<CommCall> call;
  std::shared_ptr<LocalGroup> group;
};

// One rank's communication thread. Its queue is guarded by the inbox's mutex, on which it sleeps.
class LocalEngine {
 public:
  LocalEngine(std::shared_ptr<RankContext> ctx, std::shared_ptr<LocalInbox> inbox)
      : ctx_(std::move(ctx)), inbox_(std::move(inbox)), thread_([this] { Run(); }) {}
  // Wakes the thread, even inside a collective some member never joined, and joins it; calls
  // not finished fail ("shut down").
  ~LocalEngine() {
    {
      std::lock_guard<std::mutex> lock(inbox_->mu);
      inbox_->stop = true;
    }
    inbox_->cv.notify_all();
    thread_.join();
  }

  void Submit(LocalOp op) {
    if (ctx_->Abandoned()) {  // the thread may be blocked in the abandoned call: fail here
      op.call->Reject(ctx_->NotStarted(op.call->what()));
      return;
    }
    {
      std::lock_guard<std::mutex> lock(inbox_->mu);
      queue_.push_back(std::move(op));
      ++inbox_->epoch;
    }
    inbox_->cv.notify_all();
  }

 private:
  Status ShutDown(const CommCall& call) const {
    return FailedPrecondition(call.what() + ": the local backend of world rank " +
                              std::to_string(ctx_->world_rank()) + " was shut down");
  }

  // After an abandonment, or at shutdown: nothing queued starts, posted receives are cancelled.
  void FailAll(std::deque<LocalOp>* fresh, bool shutdown) {
    for (LocalOp& op : *fresh) {
      op.call->Reject(shutdown ? ShutDown(*op.call) : ctx_->NotStarted(op.call->what()));
    }
    fresh->clear();
    for (LocalOp& op : posted_) {
      op.call->Complete(shutdown ? ShutDown(*op.call) : ctx_->AbandonedError(op.call->what()));
    }
    posted_.clear();
  }

  // Blocks until every member arrived (or shutdown), then writes this rank's result.
  void Collective(LocalOp& op) {
    const CallSpec& spec = op.call->spec();
    const uint64_t index = op.group->NextIndex(spec.rank);
    std::shared_ptr<LocalSlot> slot = op.group->Arrive(index, spec);
    {
      std::unique_lock<std::mutex> lock(inbox_->mu);
      inbox_->cv.wait(lock, [&] { return slot->complete.load() || inbox_->stop; });
      if (!slot->complete.load()) {
        op.call->Complete(ShutDown(*op.call));
        return;
      }
    }
    op.call->Complete(op.group->Finish(index, slot, spec));
  }

  void Execute(LocalOp& op) {
    const CallSpec& spec = op.call->spec();
    if (spec.op == CommOp::kSend) {
      op.group->Post(spec.rank, spec.peer, spec.tag, spec.in,
                     spec.count * static_cast<int64_t>(DTypeSize(spec.dtype)));
      op.call->Complete(Status::Ok());  // buffered: the caller's buffer may be reused
    } else if (spec.op == CommOp::kRecv) {
      posted_.push_back(op);
    } else {
      Collective(op);
    }
  }

  // Completes the posted receives whose message arrived, each (peer, tag) in issue order.
  void Match() {
    for (size_t i = 0; i < posted_.size();) {
      const CallSpec& spec = posted_[i].call->spec();
      std::vector<std::byte> msg;
      if (!posted_[i].group->Take(spec.peer, spec.rank, spec.tag, &msg)) {
        ++i;
        continue;
      }
      const size_t room = static_cast<size_t>(spec.count) * DTypeSize(spec.dtype);
      if (msg.size() > room) {
        posted_[i].call->Complete(InvalidArgument(
            posted_[i].call->what() + ": a message of " + std::to_string(msg.size()) +
            " bytes is longer than the receive buffer (" + std::to_string(room) + " bytes)"));
      } else {
        if (!msg.empty()) std::memcpy(spec.out, msg.data(), msg.size());
        posted_[i].call->Complete(Status::Ok());
      }
      posted_.erase(posted_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  void Run() {
    SetThreadName("loom-comm");
    uint64_t seen = 0;
    for (;;) {
      std::deque<LocalOp> fresh;
      {
        std::unique_lock<std::mutex> lock(inbox_->mu);
        inbox_->cv.wait(lock, [&] { return inbox_->stop || inbox_->epoch != seen; });
        seen = inbox_->epoch;
        fresh.swap(queue_);
        if (inbox_->stop) {
          lock.unlock();
          FailAll(&fresh, /*shutdown=*/true);
          return;
        }
      }
      if (ctx_->Abandoned()) {
        FailAll(&fresh, /*shutdown=*/false);
        continue;
      }
      while (!fresh.empty()) {
        LocalOp op = std::move(fresh.front());
        fresh.pop_front();
        if (!op.call->Enter()) {  // given up while the previous call blocked (op is failed)
          FailAll(&fresh, /*shutdown=*/false);
          break;
        }
        Execute(op);
        op.call->Leave();
      }
      Match();
    }
  }

  const std::shared_ptr<RankContext> ctx_;
  const std::shared_ptr<LocalInbox> inbox_;
  std::deque<LocalOp> queue_;    // GUARDED_BY(inbox_->mu)
  std::vector<LocalOp> posted_;  // receives posted, in issue order; the thread's own
  std::thread thread_;           // last: started once the members above exist
};

class LocalTransport : public GroupTransport {
 public:
  LocalTransport(std::shared_ptr<LocalGroup> group, LocalEngine* engine)
      : group_(std::move(group)), engine_(engine) {}
  void Submit(std::shared_ptr<CommCall> call) override {
    engine_->Submit({std::move(call), group_});
  }

 private:
  std::shared_ptr<LocalGroup> group_;
  LocalEngine* engine_;  // the backend's, which outlives its communicators
};

class LocalBackend : public Backend {
 public:
  LocalBackend(int rank, std::chrono::milliseconds timeout, std::shared_ptr<LocalFabric> fabric)
      : Backend(rank, fabric->size(), timeout), fabric_(std::move(fabric)) {
    engine_ = std::make_unique<LocalEngine>(context(), fabric_->inbox(rank));
  }

  BackendKind kind() const override { return BackendKind::kLocal; }
  int local_size() const override { return world_size(); }  // every rank is on this host
  bool CanServe(Device device) const override { return device == Device::kCpu; }
  [[noreturn]] void Abort(int code) override { std::_Exit(code); }

 protected:
  Result<std::unique_ptr<GroupTransport>> NewGroup(const std::string& name,
                                                   const std::vector<int>& members,
                                                   bool /*world*/) override {
    return std::unique_ptr<GroupTransport>(
        new LocalTransport(fabric_->Join(world_rank(), name, members), engine_.get()));
  }

 private:
  std::shared_ptr<LocalFabric> fabric_;
  std::unique_ptr<LocalEngine> engine_;
};

}  // namespace

Result<std::vector<std::shared_ptr<Backend>>> CreateLocalWorld(int size,
                                                               const BackendOptions& options) {
  if (size < 1)
    return InvalidArgument("a local world needs at least one rank, not " + std::to_string(size));
  LOOM_ASSIGN_OR_RETURN(const std::chrono::milliseconds timeout, DefaultTimeout(options));
  auto fabric = std::make_shared<LocalFabric>(size);
  std::vector<std::shared_ptr<Backend>> world;
  for (int r = 0; r < size; ++r)
    world.push_back(std::make_shared<LocalBackend>(r, timeout, fabric));
  return world;
}

}  // namespace loom
