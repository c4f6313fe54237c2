// MPI backend: a communication thread that runs queued non-blocking MPI operations, handles
// with deadlines, and communicators over MPI_Comm_create_group.
#include "comm/mpi/mpi_runtime.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "core/env.h"

namespace loom {
namespace {

Status MpiError(int rc, const std::string& what) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, buf, &len);
  return Internal(what + ": " + std::string(buf, static_cast<size_t>(len)));
}

// What the engine shares with its handles' waiters:
// - the abandonment, set by the first wait that passes its deadline (Communicator::Abandoned):
//   that operation may still be running inside MPI, so the engine starts nothing more and later
//   operations fail at once, naming it;
// - the call the communication thread is in, so that a wait that times out on an operation that
//   never started (queued behind a call blocked on another group) names the call it waits for.
class EngineState {
 public:
  void Abandon(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (abandoned_.load()) return;
    abandoned_what_ = what;
    abandoned_.store(true);
  }
  bool Abandoned() const { return abandoned_.load(); }
  std::string AbandonedWhat() const {
    std::lock_guard<std::mutex> lock(mu_);
    return abandoned_what_;
  }
  // The error of operation `what`, never started because of the abandonment.
  Status NotStarted(const std::string& what) const {
    return FailedPrecondition(what + " was not started: " + AbandonedWhat() +
                              " passed its deadline on this rank before it");
  }

  // Before the communication thread starts a call: false (and nothing recorded) once abandoned,
  // checked under the lock Abandon takes, so no call starts after an abandonment. `what` must
  // stay valid until Leave.
  bool Enter(const std::string* what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (abandoned_.load()) return false;
    current_ = what;
    return true;
  }
  void Leave() {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = nullptr;
  }
  std::string Current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_ ? *current_ : std::string();
  }

 private:
  mutable std::mutex mu_;
  std::atomic<bool> abandoned_{false};
  std::string abandoned_what_;            // GUARDED_BY(mu_)
  const std::string* current_ = nullptr;  // GUARDED_BY(mu_)
};

// How often a waiter checks whether its unstarted operation was abandoned (MpiHandle::Wait).
constexpr std::chrono::milliseconds kAbandonPoll{100};

class MpiHandle : public CommHandle {
 public:
  MpiHandle(TraceRecord rec, std::vector<int> members, int world_rank, TraceRing* trace,
            std::shared_ptr<EngineState> engine)
      : rec_(std::move(rec)),
        members_(std::move(members)),
        world_rank_(world_rank),
        trace_(trace),
        engine_(std::move(engine)) {}

  Status Wait(Deadline deadline) override {
    const int64_t t0 = NowNs();
    std::unique_lock<std::mutex> lock(mu_);
    // After an abandonment an operation that has not started never will, and the engine may be
    // blocked in the abandoned call, unable to fail it: its waiter looks every kAbandonPoll
    // rather than wait out its deadline.
    bool finished = false, never_started = false;
    for (;;) {
      const Deadline slice = std::min(deadline, Clock::now() + kAbandonPoll);
      finished = cv_.wait_until(lock, slice, [&] { return done_; });
      if (finished || Clock::now() >= deadline) break;
      if (rec_.start_ns == 0 && engine_->Abandoned()) {
        never_started = true;
        break;
      }
    }
    if (!recorded_) {
      recorded_ = true;
      TraceRecord r = rec_;
      r.wait_ns = NowNs() - t0;
      if (never_started) {
        r.start_ns = r.end_ns = NowNs();  // not a hang: no time in flight
      } else if (!finished) {
        r.end_ns = 0;  // never finished: what the hang detector looks for
      }
      trace_->Add(r);
    }
    if (finished) return status_;
    // Only on failure: the name is not built on every wait.
    const std::string op = std::string(CommOpName(rec_.op)) + " #" + std::to_string(rec_.seq) +
                           " on group '" + rec_.group + "' " + FormatMembers(members_);
    if (never_started) return engine_->NotStarted(op);
    {
      const int64_t waited_ms = (NowNs() - rec_.enqueue_ns) / 1000000;
      engine_->Abandon(op);
      std::string why = "a member is hung or dead";
      if (rec_.start_ns == 0) {  // queued behind a call that has not returned
        const std::string current = engine_->Current();
        if (!current.empty()) why = "not started: this rank is still in " + current;
      }
      return DeadlineExceeded(
          op + " (" + std::to_string(rec_.bytes) + " bytes" +
          (rec_.peer >= 0 ? ", peer " + std::to_string(members_[rec_.peer]) : "") +
          ") did not complete within " + std::to_string(waited_ms) + " ms (world rank " +
          std::to_string(world_rank_) + " waiting; " + why + ")");
    }
  }

  bool Done() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }

  void MarkStarted() {
    std::lock_guard<std::mutex> lock(mu_);  // a timed-out waiter reads start_ns
    rec_.start_ns = NowNs();
  }
  void Complete(Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    rec_.end_ns = NowNs();
    status_ = std::move(st);
    done_ = true;
    cv_.notify_all();
  }

 private:
  TraceRecord rec_;  // start/end written by the engine thread before done_ is published
  std::vector<int> members_;
  int world_rank_;
  TraceRing* trace_;
  std::shared_ptr<EngineState> engine_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;      // GUARDED_BY(mu_)
  bool recorded_ = false;  // GUARDED_BY(mu_)
  Status status_;          // GUARDED_BY(mu_)
};

}  // namespace

// The communication thread: starts queued operations in issue order, polls those in flight.
class MpiEngine {
 public:
  struct Op {
    // Issues the MPI call. Point-to-point calls are non-blocking and leave a request to poll;
    // collectives run the blocking call here (OpenMPI's tuned blocking collectives reach about
    // twice the bandwidth of its non-blocking ones) and leave MPI_REQUEST_NULL.
    std::function<int(MPI_Request*)> start;
    std::shared_ptr<MpiHandle> handle;
    std::string what;
    bool cancel = false;  // a receive: cancelled after an abandonment
    MPI_Request request = MPI_REQUEST_NULL;
  };

  MpiEngine() : thread_([this] { Run(); }) {}
  ~MpiEngine() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    // Never reached after an abandonment: the owners leak the engine then (the thread may be
    // blocked inside MPI for good, using the members).
    thread_.join();
  }

  void Submit(Op op) {
    if (state_->Abandoned()) {  // the thread may be blocked in the abandoned call: fail here
      FailUnstarted(op);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(op));
    }
    cv_.notify_one();
  }

  const std::shared_ptr<EngineState>& state() const { return state_; }

 private:
  void FailUnstarted(Op& op) const {
    op.handle->MarkStarted();  // start = end: no busy time in the trace
    op.handle->Complete(state_->NotStarted(op.what));
  }

  // After an abandonment: fail what was queued, and cancel the posted receives so that MPI writes
  // no more into their buffers (sends only read theirs and are left; the job is aborted).
  void Abandon(std::deque<Op>* fresh, std::vector<Op>* inflight) {
    for (Op& op : *fresh) FailUnstarted(op);
    fresh->clear();
    for (Op& op : *inflight) {
      if (op.cancel) {
        MPI_Cancel(&op.request);
        MPI_Request_free(&op.request);
      }
      op.handle->Complete(FailedPrecondition(op.what +
                                             " was abandoned: " + state_->AbandonedWhat() +
                                             " passed its deadline on this rank"));
    }
    inflight->clear();
  }

  void Run() {
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
          cv_.wait_for(lock, std::chrono::microseconds(50),
                       [&] { return stop_ || !queue_.empty(); });
        }
        if (stop_) return;  // owners wait for their handles before destroying the runtime
        fresh.swap(queue_);
      }
      if (state_->Abandoned()) {
        Abandon(&fresh, &inflight);
        continue;
      }
      for (size_t k = 0; k < fresh.size(); ++k) {
        Op& op = fresh[k];
        if (!state_->Enter(&op.what)) {  // given up while the previous call blocked
          std::deque<Op> rest(std::make_move_iterator(fresh.begin() + static_cast<long>(k)),
                              std::make_move_iterator(fresh.end()));
          fresh.resize(k);
          Abandon(&rest, &inflight);
          break;
        }
        op.handle->MarkStarted();
        int rc = op.start(&op.request);
        state_->Leave();
        if (rc != MPI_SUCCESS) {
          op.handle->Complete(MpiError(rc, op.what));
        } else if (op.request == MPI_REQUEST_NULL) {
          op.handle->Complete(Status::Ok());  // a blocking collective, already done
        } else {
          inflight.push_back(std::move(op));
        }
      }
      bool progressed = !fresh.empty();
      for (size_t i = 0; i < inflight.size();) {
        int flag = 0;
        int rc = MPI_Test(&inflight[i].request, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag) {
          inflight[i].handle->Complete(rc == MPI_SUCCESS ? Status::Ok()
                                                         : MpiError(rc, inflight[i].what));
          inflight[i] = std::move(inflight.back());
          inflight.pop_back();
          progressed = true;
        } else {
          ++i;
        }
      }
      idle_polls = progressed ? 0 : idle_polls + 1;
      if (!progressed && idle_polls <= 64) std::this_thread::yield();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;  // GUARDED_BY(mu_)
  bool stop_ = false;     // GUARDED_BY(mu_)
  std::shared_ptr<EngineState> state_ = std::make_shared<EngineState>();
  std::thread thread_;  // last: started once the members above exist
};

namespace {

class MpiCommunicator : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, std::string name, std::vector<int> members, int world_rank,
                  std::shared_ptr<MpiEngine> engine, TraceRing* trace,
                  std::chrono::milliseconds timeout)
      : comm_(comm),
        name_(std::move(name)),
        members_(std::move(members)),
        world_rank_(world_rank),
        engine_(std::move(engine)),
        trace_(trace) {
    MPI_Comm_rank(comm_, &rank_);
    timeout_ = timeout;
  }
  // After an abandonment the abandoned call may be using this communicator: it is left to the
  // job's abort.
  ~MpiCommunicator() override {
    if (Abandoned()) {
      // Neither the communicator nor the engine (whose thread may be blocked in MPI for good)
      // may go; the job is being aborted.
      (void)new std::shared_ptr<MpiEngine>(std::move(engine_));
      return;
    }
    MPI_Comm_free(&comm_);
  }
  bool Abandoned() const override { return engine_->state()->Abandoned(); }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  const std::string& name() const override { return name_; }
  const std::vector<int>& members() const override { return members_; }

  HandlePtr AllReduceAsync(float* data, int64_t n, ReduceOp op) override {
    MPI_Comm c = comm_;
    MPI_Op mop = op == ReduceOp::kSum ? MPI_SUM : MPI_MAX;
    return Issue(CommOp::kAllReduce, n, -1, [=](MPI_Request* r) {
      *r = MPI_REQUEST_NULL;
      return MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, mop, c);
    });
  }
  HandlePtr ReduceScatterAsync(const float* in, float* out, int64_t n) override {
    MPI_Comm c = comm_;
    return Issue(CommOp::kReduceScatter, n * size(), -1, [=](MPI_Request* r) {
      *r = MPI_REQUEST_NULL;
      return MPI_Reduce_scatter_block(in, out, static_cast<int>(n), MPI_FLOAT, MPI_SUM, c);
    });
  }
  HandlePtr AllGatherAsync(const float* in, float* out, int64_t n) override {
    MPI_Comm c = comm_;
    // In place when `in` is this rank's chunk of `out` (ZeRO re-gathers updated parameters).
    const void* send = in == out + static_cast<int64_t>(rank_) * n ? MPI_IN_PLACE : in;
    return Issue(CommOp::kAllGather, n * size(), -1, [=](MPI_Request* r) {
      *r = MPI_REQUEST_NULL;
      return MPI_Allgather(send, static_cast<int>(n), MPI_FLOAT, out, static_cast<int>(n),
                           MPI_FLOAT, c);
    });
  }
  HandlePtr BroadcastAsync(float* data, int64_t n, int root) override {
    MPI_Comm c = comm_;
    return Issue(CommOp::kBroadcast, n, root, [=](MPI_Request* r) {
      *r = MPI_REQUEST_NULL;
      return MPI_Bcast(data, static_cast<int>(n), MPI_FLOAT, root, c);
    });
  }
  HandlePtr SendAsync(const float* data, int64_t n, int peer, int tag) override {
    MPI_Comm c = comm_;
    return Issue(CommOp::kSend, n, peer, tag, [=](MPI_Request* r) {
      return MPI_Isend(data, static_cast<int>(n), MPI_FLOAT, peer, tag, c, r);
    });
  }
  HandlePtr RecvAsync(float* data, int64_t n, int peer, int tag) override {
    MPI_Comm c = comm_;
    return Issue(CommOp::kRecv, n, peer, tag, [=](MPI_Request* r) {
      return MPI_Irecv(data, static_cast<int>(n), MPI_FLOAT, peer, tag, c, r);
    });
  }
  HandlePtr BarrierAsync() override {
    MPI_Comm c = comm_;
    return Issue(CommOp::kBarrier, 0, -1, [=](MPI_Request* r) {
      *r = MPI_REQUEST_NULL;
      return MPI_Barrier(c);
    });
  }

 private:
  HandlePtr Issue(CommOp op, int64_t floats, int peer, std::function<int(MPI_Request*)> start) {
    return Issue(op, floats, peer, -1, std::move(start));
  }
  HandlePtr Issue(CommOp op, int64_t floats, int peer, int tag,
                  std::function<int(MPI_Request*)> start) {
    TraceRecord rec;
    rec.tag = tag;
    rec.op = op;
    rec.group = name_;
    rec.seq = next_seq_++;
    rec.bytes = floats * static_cast<int64_t>(sizeof(float));
    rec.peer = peer;
    rec.enqueue_ns = NowNs();
    auto h = std::make_shared<MpiHandle>(rec, members_, world_rank_, trace_, engine_->state());
    const std::string what = std::string(CommOpName(op)) + " #" + std::to_string(rec.seq) +
                             " on group '" + name_ + "' " + FormatMembers(members_);
    if (floats > INT_MAX) {
      h->Complete(InvalidArgument(what + ": " + std::to_string(floats) +
                                  " elements exceed the MPI count limit; split the buffer"));
      return h;
    }
    if (peer >= size() && op != CommOp::kAllReduce) {
      h->Complete(InvalidArgument(what + ": peer/root " + std::to_string(peer) +
                                  " is not a rank of the group"));
      return h;
    }
    engine_->Submit({std::move(start), h, what, /*cancel=*/op == CommOp::kRecv});
    return h;
  }

  MPI_Comm comm_;
  std::string name_;
  std::vector<int> members_;
  int rank_ = 0, world_rank_;
  std::shared_ptr<MpiEngine> engine_;
  TraceRing* trace_;
  std::atomic<uint64_t> next_seq_{0};
};

}  // namespace

Result<std::unique_ptr<MpiRuntime>> MpiRuntime::Init(int* argc, char*** argv) {
  // CPU ranks share cores with their compute threads: an MPI call that waits for a peer should
  // yield the core instead of spinning on it (an explicit setting in the environment wins).
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  int provided = 0;
  int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Init_thread");
  if (provided < MPI_THREAD_MULTIPLE) {
    return FailedPrecondition("MPI does not provide MPI_THREAD_MULTIPLE (got level " +
                              std::to_string(provided) + ")");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::unique_ptr<MpiRuntime> rt(new MpiRuntime());
  MPI_Comm_rank(MPI_COMM_WORLD, &rt->world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &rt->world_size_);
  if (const char* ls = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
    rt->local_size_ = std::max(1, std::atoi(ls));
  LOOM_ASSIGN_OR_RETURN(const int64_t timeout_ms, ReadTunable(kCommTimeoutTunable));
  rt->timeout_ = std::chrono::milliseconds(timeout_ms);
  rt->engine_ = std::make_shared<MpiEngine>();
  return rt;
}

bool LaunchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_RANK") || std::getenv("PMIX_RANK");
}

MpiRuntime::~MpiRuntime() {
  // After an abandonment a call may still be inside MPI: finalizing then is erroneous (the
  // callers abort the job instead; this is the fallback for those that do not).
  if (abandoned()) {  // the engine's thread may be blocked in MPI for good: leave it and MPI be
    (void)new std::shared_ptr<MpiEngine>(std::move(engine_));
    return;
  }
  engine_.reset();  // joins the communication thread (null when Init failed before making it)
  MPI_Finalize();
}

bool MpiRuntime::abandoned() const {
  return engine_ && engine_->state()->Abandoned();
}

Result<std::unique_ptr<Communicator>> MpiRuntime::World() {
  MPI_Comm dup;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_dup");
  std::vector<int> members(static_cast<size_t>(world_size_));
  for (int i = 0; i < world_size_; ++i) members[static_cast<size_t>(i)] = i;
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(dup, "world", members, world_rank_, engine_, &trace_, timeout_));
}

Result<std::unique_ptr<Communicator>> MpiRuntime::CreateGroup(const std::string& name,
                                                              const std::vector<int>& members) {
  if (std::find(members.begin(), members.end(), world_rank_) == members.end()) {
    return InvalidArgument("group '" + name + "' " + FormatMembers(members) +
                           " does not contain this rank (" + std::to_string(world_rank_) + ")");
  }
  MPI_Group world_group, group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  int rc = MPI_Group_incl(world_group, static_cast<int>(members.size()), members.data(), &group);
  MPI_Group_free(&world_group);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Group_incl for group '" + name + "'");
  // The tag only has to separate concurrent creations among the same members.
  int tag = static_cast<int>(std::hash<std::string>{}(name) % 30000);
  MPI_Comm comm;
  rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &comm);
  MPI_Group_free(&group);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_create_group for '" + name + "'");
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(comm, name, members, world_rank_, engine_, &trace_, timeout_));
}

void MpiRuntime::Abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace loom
