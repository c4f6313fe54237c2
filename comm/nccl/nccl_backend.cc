// NCCL backend: device selection, the bootstrap of each group's communicator over another
// backend, the transport of a group, and the engine that runs every call of this rank on one
// communication stream and completes it from CUDA events.
#include "comm/nccl/nccl_backend.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "comm/call.h"
#include "comm/mpi/mpi_backend.h"
#include "core/threads.h"

namespace loom {
namespace {

Status CudaError(cudaError_t e, const std::string& what) {
  return Internal("CUDA " + what + ": " + cudaGetErrorString(e));
}

Status NcclError(ncclResult_t r, const std::string& what, ncclComm_t comm = nullptr) {
  std::string msg = "NCCL " + what + ": " + ncclGetErrorString(r);
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') msg += " (" + std::string(last) + ")";
  }
  return Internal(msg);
}

ncclDataType_t NcclType(DType t) {
  switch (t) {
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    case DType::kI32:
      return ncclInt32;
    case DType::kU8:
      return ncclUint8;
    default:
      return ncclFloat32;  // F32 (the front refuses other dtypes when the call is issued)
  }
}

ncclRedOp_t NcclOp(ReduceOp op) {
  return op == ReduceOp::kMax ? ncclMax : ncclSum;
}

// Runs the calls of one rank, in issue order, on its communication stream.
class NcclEngine {
 public:
  using LaunchFn = std::function<ncclResult_t(cudaStream_t)>;

  // The calls of one exchange (SubmitExchange): whether its first call, which runs the group,
  // was launched. The engine thread's own once queued.
  struct Exchange {
    std::string leader;  // the first call's what()
    bool launched = false;
  };

  struct Job {
    std::shared_ptr<CommCall> call;  // null: destroy `comm` once every earlier call is done
    ncclComm_t comm = nullptr;
    LaunchFn launch;
    cudaEvent_t ready = nullptr;  // recorded on the compute stream when the call was issued
    void* free_after = nullptr;   // with a null call: device memory freed with `comm`
    std::shared_ptr<Exchange> exchange = nullptr;  // a call of an exchange
    bool leads = false;                            // ... its first, which runs the group
  };

  static Result<std::shared_ptr<NcclEngine>> Create(int device, std::shared_ptr<RankContext> ctx) {
    std::shared_ptr<NcclEngine> e(new NcclEngine(device, std::move(ctx)));
    cudaError_t err = cudaStreamCreateWithFlags(&e->stream_, cudaStreamNonBlocking);
    if (err != cudaSuccess) return CudaError(err, "cudaStreamCreate (communication stream)");
    err = cudaEventCreate(&e->ref_);
    if (err != cudaSuccess) return CudaError(err, "cudaEventCreate");
    LOOM_RETURN_IF_ERROR(e->Anchor());
    e->thread_ = std::thread([raw = e.get()] { raw->Run(); });
    return e;
  }

  ~NcclEngine() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (ref_ != nullptr) cudaEventDestroy(ref_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int device() const { return device_; }

  void set_compute_stream(cudaStream_t s) {
    std::lock_guard<std::mutex> lock(mu_);
    compute_ = s;
  }

  // On the caller's thread: records the "inputs ready" event on the compute stream, queues.
  void Submit(std::shared_ptr<CommCall> call, ncclComm_t comm, LaunchFn launch) {
    Status st;
    cudaEvent_t ready = RecordReady(call->what(), &st);
    if (!st.ok()) {
      call->Reject(std::move(st));
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back({std::move(call), comm, std::move(launch), ready, nullptr});
    }
    cv_.notify_all();
  }

  // The calls of one exchange, queued together behind one "inputs ready" event: the first runs
  // `group` (every call's transfer), each other one launches nothing and completes once the
  // stream has passed the group, or fails, unstarted, when the first was not launched.
  void SubmitExchange(const std::vector<std::shared_ptr<CommCall>>& calls, ncclComm_t comm,
                      LaunchFn group) {
    Status st;
    cudaEvent_t ready = RecordReady(calls.front()->what(), &st);
    if (!st.ok()) {
      for (const auto& c : calls) c->Reject(st);
      return;
    }
    auto exchange = std::make_shared<Exchange>();
    exchange->leader = calls.front()->what();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back({calls.front(), comm, std::move(group), ready, nullptr, exchange, true});
      for (size_t i = 1; i < calls.size(); ++i) {
        queue_.push_back({calls[i], comm, [](cudaStream_t) { return ncclSuccess; }, nullptr,
                          nullptr, exchange, false});
      }
    }
    cv_.notify_all();
  }

  // A group's communicator, aborted with the others when the rank gives up.
  void Register(ncclComm_t comm) {
    std::lock_guard<std::mutex> lock(mu_);
    known_.insert(comm);
  }

  // Destroys `comm` (and frees `scratch`) once every call queued before has completed: a group
  // is gone.
  void Release(ncclComm_t comm, void* scratch) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back({nullptr, comm, nullptr, nullptr, scratch});
    }
    cv_.notify_all();
  }

 private:
  struct InFlight {
    std::shared_ptr<CommCall> call;
    ncclComm_t comm;
    cudaEvent_t start, end;
  };

  NcclEngine(int device, std::shared_ptr<RankContext> ctx)
      : device_(device), ctx_(std::move(ctx)) {}

  // An event recorded on the compute stream now (what the call `what` must wait for); on
  // failure nullptr and *st says why.
  cudaEvent_t RecordReady(const std::string& what, Status* st) {
    cudaSetDevice(device_);
    cudaEvent_t ready = nullptr;
    cudaError_t err = cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    if (err == cudaSuccess) {
      cudaStream_t compute;
      {
        std::lock_guard<std::mutex> lock(mu_);
        compute = compute_;
      }
      err = cudaEventRecord(ready, compute);
    }
    if (err != cudaSuccess) {
      if (ready != nullptr) cudaEventDestroy(ready);
      *st = CudaError(err, "recording the compute stream's event for " + what);
      return nullptr;
    }
    return ready;
  }

  // The reference between the stream's clock and the trace's (re-taken while idle, at most once a
  // second, so that the two clocks' drift, tens of microseconds a second, never builds up).
  Status Anchor() {
    cudaError_t err = cudaEventRecord(ref_, stream_);
    if (err == cudaSuccess) err = cudaEventSynchronize(ref_);
    if (err != cudaSuccess) return CudaError(err, "cudaEventRecord (time reference)");
    ref_ns_ = NowNs();
    return Status::Ok();
  }

  int64_t EventNs(cudaEvent_t e) const {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, ref_, e) != cudaSuccess) return NowNs();
    return ref_ns_ + static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  }

  void Run() {
    SetThreadName("loom-nccl");
    cudaSetDevice(device_);
    std::deque<Job> todo;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (in_flight_.empty()) {
          cv_.wait_for(lock, std::chrono::milliseconds(20),
                       [&] { return stop_ || !queue_.empty(); });
        }
        todo.insert(todo.end(), queue_.begin(), queue_.end());
        queue_.clear();
        if (stop_ && todo.empty() && in_flight_.empty()) break;
        if (stop_ && stop_ns_ == 0) stop_ns_ = NowNs();
      }
      // Shutting down with calls that never end (a lost peer nobody waited for): give up on them
      // after a deadline rather than hang the process's exit.
      const bool stuck =
          stop_ns_ != 0 && NowNs() - stop_ns_ > ctx_->default_timeout().count() * int64_t{1000000};
      if ((ctx_->Abandoned() || ctx_->Cancelled() || stuck) && !aborted_) AbortAll();
      while (!todo.empty()) {
        if (todo.front().call == nullptr && !in_flight_.empty()) break;  // destroy after them
        Job job = std::move(todo.front());
        todo.pop_front();
        if (job.call == nullptr) {
          Destroy(job.comm);
          if (job.free_after != nullptr) cudaFree(job.free_after);
        } else {
          Launch(std::move(job));
        }
      }
      Poll();
      if (in_flight_.empty() && NowNs() - ref_ns_ > int64_t{1000000000}) (void)Anchor();
      if (!in_flight_.empty()) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  void Launch(Job job) {
    if (job.ready != nullptr) {
      cudaStreamWaitEvent(stream_, job.ready, 0);
      cudaEventDestroy(job.ready);
    }
    if (!job.call->Enter()) return;  // refused: the rank gave up; Enter failed the call
    if (aborted_) {
      job.call->Leave();
      job.call->Complete(AbortedError(job.call->what()));
      return;
    }
    if (job.exchange != nullptr && !job.leads && !job.exchange->launched) {
      job.call->Leave();
      job.call->Complete(FailedPrecondition(job.call->what() +
                                            " was not started: " + job.exchange->leader +
                                            ", the first call of its exchange, failed"));
      return;
    }
    cudaEvent_t start = nullptr, end = nullptr;
    cudaError_t err = cudaEventCreate(&start);
    if (err == cudaSuccess) err = cudaEventCreate(&end);
    if (err == cudaSuccess) err = cudaEventRecord(start, stream_);
    Status st;
    if (err != cudaSuccess) {
      st = CudaError(err, "events of " + job.call->what());
    } else {
      ncclResult_t r = job.launch(stream_);
      // A non-blocking communicator may still be enqueueing (NCCL connects lazily: a first call
      // waits for its peers): wait until NCCL has taken the call, unless the rank gives up or
      // the engine stops meanwhile.
      while (r == ncclInProgress) {
        if (ctx_->Abandoned() || ctx_->Cancelled() || StopRequested()) {
          job.call->Leave();
          cudaEventDestroy(start);
          cudaEventDestroy(end);
          AbortAll();  // this call's communicator too
          job.call->Complete(ctx_->AbandonedError(job.call->what()));
          return;
        }
        std::this_thread::yield();
        ncclCommGetAsyncError(job.comm, &r);
      }
      if (r != ncclSuccess) {
        // After an error the communicator is unusable, and calls in flight on it may never end
        // (or end early, their data incomplete) while later calls wait behind them on the one
        // stream: fail this call with NCCL's words, abort every communicator, fail the rest.
        st = NcclError(r, job.call->what(), job.comm);
        job.call->Leave();
        cudaEventDestroy(start);
        cudaEventDestroy(end);
        Poll();                  // the calls before it that ended succeed,
        AbortAll(st.message());  // the others fail first
        job.call->Complete(std::move(st));
        return;
      } else if ((err = cudaEventRecord(end, stream_)) != cudaSuccess) {
        st = CudaError(err, "cudaEventRecord after " + job.call->what());
      }
    }
    job.call->Leave();
    if (!st.ok()) {
      if (start != nullptr) cudaEventDestroy(start);
      if (end != nullptr) cudaEventDestroy(end);
      job.call->Complete(std::move(st));
      return;
    }
    if (job.leads) job.exchange->launched = true;
    in_flight_.push_back({std::move(job.call), job.comm, start, end});
  }

  // Completes the calls whose end event has happened, in order; an asynchronous NCCL error (a
  // failed peer) fails the waiting call with NCCL's words.
  void Poll() {
    while (!in_flight_.empty()) {
      InFlight& f = in_flight_.front();
      const cudaError_t q = cudaEventQuery(f.end);
      if (q == cudaErrorNotReady) {
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(f.comm, &async);
        if (async == ncclSuccess || async == ncclInProgress) return;
        // A failed communicator's kernel may never end, and every later call waits behind it
        // on the one stream: fail this call with NCCL's words, abort, fail the rest.
        Status st = NcclError(async, f.call->what(), f.comm);
        f.call->Complete(st);
        cudaEventDestroy(f.start);
        cudaEventDestroy(f.end);
        in_flight_.pop_front();
        AbortAll(st.message());
        return;
      } else if (q != cudaSuccess) {
        f.call->Complete(CudaError(q, f.call->what()));
      } else {
        f.call->CompleteTimed(Status::Ok(), EventNs(f.start), EventNs(f.end));
      }
      cudaEventDestroy(f.start);
      cudaEventDestroy(f.end);
      in_flight_.pop_front();
    }
  }

  bool StopRequested() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }

  void AbortComm(ncclComm_t c) {
    if (aborted_comms_.insert(c).second) (void)ncclCommAbort(c);
  }

  // The rank gave up (a deadline passed), is being stopped, or NCCL failed (`nccl_error`, its
  // message): no NCCL kernel may wait for a lost peer forever, so every communicator is aborted
  // and the calls in flight fail.
  void AbortAll(const std::string& nccl_error = "") {
    aborted_ = true;
    if (abort_reason_.empty()) abort_reason_ = nccl_error;
    std::vector<ncclComm_t> comms;
    for (const InFlight& f : in_flight_) comms.push_back(f.comm);
    {
      std::lock_guard<std::mutex> lock(mu_);
      comms.insert(comms.end(), known_.begin(), known_.end());
    }
    for (ncclComm_t c : comms) AbortComm(c);
    for (InFlight& f : in_flight_) {
      f.call->Complete(AbortedError(f.call->what()));
      cudaEventDestroy(f.start);
      cudaEventDestroy(f.end);
    }
    in_flight_.clear();
  }

  // How a call fails once the communicators are aborted: after an NCCL error, naming it; after a
  // deadline, naming the call that passed it (RankContext::AbandonedError).
  Status AbortedError(const std::string& what) const {
    if (abort_reason_.empty()) return ctx_->AbandonedError(what);
    return FailedPrecondition(what +
                              " was abandoned: this rank's NCCL communicators were aborted after " +
                              abort_reason_);
  }

  void Destroy(ncclComm_t comm) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      known_.erase(comm);
    }
    if (aborted_comms_.erase(comm) != 0) return;  // aborted: NCCL freed it
    // A non-blocking communicator finalizes in the background: wait (against the deadline) for
    // it to flush, then free it; one that does not finish in time is aborted instead.
    ncclResult_t r = ncclCommFinalize(comm);
    const int64_t deadline = NowNs() + ctx_->default_timeout().count() * int64_t{1000000};
    while (r == ncclInProgress && NowNs() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      ncclCommGetAsyncError(comm, &r);
    }
    if (r == ncclSuccess) {
      (void)ncclCommDestroy(comm);
    } else {
      (void)ncclCommAbort(comm);
    }
  }

  const int device_;
  const std::shared_ptr<RankContext> ctx_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ref_ = nullptr;
  int64_t ref_ns_ = 0;
  std::thread thread_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;           // GUARDED_BY(mu_)
  bool stop_ = false;               // GUARDED_BY(mu_)
  cudaStream_t compute_ = nullptr;  // GUARDED_BY(mu_)
  std::set<ncclComm_t> known_;      // GUARDED_BY(mu_)

  // The engine thread's own.
  int64_t stop_ns_ = 0;  // when it saw stop_
  std::deque<InFlight> in_flight_;
  std::set<ncclComm_t> aborted_comms_;
  bool aborted_ = false;
  std::string abort_reason_;  // the NCCL error that made the engine abort; "" otherwise
};

class NcclGroup : public GroupTransport {
 public:
  NcclGroup(ncclComm_t comm, float* scratch, std::shared_ptr<NcclEngine> engine)
      : comm_(comm), scratch_(scratch), engine_(std::move(engine)) {
    engine_->Register(comm_);
  }
  // The communicator and the barrier's scratch go once the calls queued before are done.
  ~NcclGroup() override { engine_->Release(comm_, scratch_); }

  void Submit(std::shared_ptr<CommCall> call) override {
    const CallSpec& s = call->spec();
    if (s.op != CommOp::kBarrier && s.device != Device::kCuda) {
      call->Reject(InvalidArgument(call->what() + ": the nccl backend serves device memory only"));
      return;
    }
    const ncclComm_t c = comm_;
    const ncclDataType_t t = NcclType(s.dtype);
    const ncclRedOp_t op = NcclOp(s.reduce);
    const size_t n = static_cast<size_t>(s.count);
    const int peer = s.peer;
    const void* in = s.in;
    void* out = s.out;
    float* scratch = scratch_;
    std::function<ncclResult_t(cudaStream_t)> launch;
    switch (s.op) {
      case CommOp::kAllReduce:
        launch = [=](cudaStream_t st) { return ncclAllReduce(out, out, n, t, op, c, st); };
        break;
      case CommOp::kReduceScatter:
        launch = [=](cudaStream_t st) { return ncclReduceScatter(in, out, n, t, op, c, st); };
        break;
      case CommOp::kAllGather:
        launch = [=](cudaStream_t st) { return ncclAllGather(in, out, n, t, c, st); };
        break;
      case CommOp::kBroadcast:
        launch = [=](cudaStream_t st) { return ncclBroadcast(out, out, n, t, peer, c, st); };
        break;
      case CommOp::kSend:
        launch = [=](cudaStream_t st) { return ncclSend(in, n, t, peer, c, st); };
        break;
      case CommOp::kRecv:
        launch = [=](cudaStream_t st) { return ncclRecv(out, n, t, peer, c, st); };
        break;
      case CommOp::kBarrier:
        launch = [=](cudaStream_t st) {
          return ncclAllReduce(scratch, scratch, 1, ncclFloat32, ncclSum, c, st);
        };
        break;
    }
    engine_->Submit(std::move(call), comm_, std::move(launch));
  }

  // The sends and receives of one exchange as one NCCL group (ncclGroupStart/End), so that none
  // holds the stream waiting for its peer while the others wait behind it (NcclEngine::
  // SubmitExchange: the first call runs the group; the others' trace records end with it).
  void SubmitBatch(const std::vector<std::shared_ptr<CommCall>>& calls) override {
    if (calls.size() < 2) {
      for (const auto& call : calls) Submit(call);
      return;
    }
    struct Op {
      bool send;
      const void* in;
      void* out;
      size_t n;
      ncclDataType_t t;
      int peer;
    };
    // The front has checked every call (Communicator::Check): sends and receives of device
    // memory, to ranks of the group.
    std::vector<Op> ops;
    for (const auto& call : calls) {
      const CallSpec& s = call->spec();
      ops.push_back({s.op == CommOp::kSend, s.in, s.out, static_cast<size_t>(s.count),
                     NcclType(s.dtype), s.peer});
    }
    const ncclComm_t c = comm_;
    engine_->SubmitExchange(calls, comm_, [ops = std::move(ops), c](cudaStream_t st) {
      ncclResult_t r = ncclGroupStart();
      if (r != ncclSuccess) return r;
      for (const Op& op : ops) {
        r = op.send ? ncclSend(op.in, op.n, op.t, op.peer, c, st)
                    : ncclRecv(op.out, op.n, op.t, op.peer, c, st);
        if (r != ncclSuccess && r != ncclInProgress) {
          (void)ncclGroupEnd();  // closes the group; the first error is the one reported
          return r;
        }
      }
      return ncclGroupEnd();
    });
  }

 private:
  ncclComm_t comm_;
  float* scratch_;  // one device float for barriers
  std::shared_ptr<NcclEngine> engine_;
};

class NcclBackend : public Backend {
 public:
  NcclBackend(std::shared_ptr<Backend> bootstrap, std::chrono::milliseconds timeout)
      : Backend(bootstrap->world_rank(), bootstrap->world_size(), timeout),
        bootstrap_(std::move(bootstrap)) {}

  Status Start() {
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return CudaError(err, "cudaGetDevice");
    LOOM_ASSIGN_OR_RETURN(engine_, NcclEngine::Create(device, context()));
    return Status::Ok();
  }

  BackendKind kind() const override { return BackendKind::kNccl; }
  int local_size() const override { return bootstrap_->local_size(); }
  bool CanServe(Device device) const override { return device == Device::kCuda; }
  [[noreturn]] void Abort(int code) override {
    bootstrap_->Abort(code);
    std::_Exit(code);  // not reached: the bootstrap's Abort does not return
  }

  void set_compute_stream(cudaStream_t s) { engine_->set_compute_stream(s); }

 protected:
  Result<std::unique_ptr<GroupTransport>> NewGroup(const std::string& name,
                                                   const std::vector<int>& members,
                                                   bool world) override {
    const std::string group = "group '" + name + "' " + FormatMembers(members);
    // The unique id travels over the bootstrap's group of the same members.
    std::shared_ptr<Communicator> boot;
    if (world) {
      LOOM_ASSIGN_OR_RETURN(boot, bootstrap_->World());
    } else {
      LOOM_ASSIGN_OR_RETURN(boot, bootstrap_->CreateGroup("nccl-id:" + name, members));
    }
    ncclUniqueId id{};
    if (boot->rank() == 0) {
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) return NcclError(r, "ncclGetUniqueId for " + group);
    }
    LOOM_RETURN_IF_ERROR(boot->Broadcast(
        CommBuffer{&id, static_cast<int64_t>(sizeof(id)), DType::kU8, Device::kCpu}, 0));
    cudaSetDevice(engine_->device());
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // polled below against the deadline
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&comm, boot->size(), id, boot->rank(), &config);
    const auto deadline = std::chrono::steady_clock::now() + default_timeout();
    while (r == ncclInProgress) {
      if (std::chrono::steady_clock::now() > deadline) {
        ncclCommAbort(comm);
        return DeadlineExceeded("NCCL communicator of " + group + " on world rank " +
                                std::to_string(world_rank()) + ": not every member joined within " +
                                std::to_string(default_timeout().count()) + " ms");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ncclCommGetAsyncError(comm, &r);
    }
    if (r != ncclSuccess) {
      Status st = NcclError(r, "ncclCommInitRank for " + group, comm);
      if (comm != nullptr) ncclCommAbort(comm);
      return st;
    }
    float* scratch = nullptr;
    const cudaError_t err = cudaMalloc(&scratch, sizeof(float));
    if (err != cudaSuccess) {
      ncclCommDestroy(comm);
      return CudaError(err, "cudaMalloc (barrier scratch of " + group + ")");
    }
    return std::unique_ptr<GroupTransport>(new NcclGroup(comm, scratch, engine_));
  }

 private:
  std::shared_ptr<Backend> bootstrap_;
  std::shared_ptr<NcclEngine> engine_;
};

}  // namespace

Result<int> NcclDeviceForThisRank() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    return FailedPrecondition("the nccl backend needs a GPU; this machine has none (or no driver)");
  }
  int local = 0;
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"}) {
    if (const char* v = std::getenv(var)) {
      local = std::max(0, std::atoi(v));
      break;
    }
  }
  const int device = local % count;
  const cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) {
    return CudaError(err, "cudaSetDevice(" + std::to_string(device) + ") for local rank " +
                              std::to_string(local));
  }
  return device;
}

Result<std::shared_ptr<Backend>> CreateNcclBackendOver(std::shared_ptr<Backend> bootstrap,
                                                       const BackendOptions& options) {
  if (bootstrap == nullptr) return InvalidArgument("the nccl backend needs a bootstrap backend");
  LOOM_ASSIGN_OR_RETURN(const std::chrono::milliseconds timeout, DefaultTimeout(options));
  auto backend = std::make_shared<NcclBackend>(std::move(bootstrap), timeout);
  LOOM_RETURN_IF_ERROR(backend->Start());
  return std::shared_ptr<Backend>(std::move(backend));
}

Result<std::shared_ptr<Backend>> CreateNcclBackend(const BackendOptions& options) {
  LOOM_ASSIGN_OR_RETURN(const int device, NcclDeviceForThisRank());
  (void)device;
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<Backend> mpi, CreateMpiBackend(options));
  return CreateNcclBackendOver(std::move(mpi), options);
}

Status SetNcclComputeStream(Backend& backend, void* cuda_stream) {
  auto* nccl = dynamic_cast<NcclBackend*>(&backend);
  if (nccl == nullptr) {
    return InvalidArgument(std::string("SetNcclComputeStream: the backend is '") +
                           BackendKindName(backend.kind()) + "', not 'nccl'");
  }
  nccl->set_compute_stream(static_cast<cudaStream_t>(cuda_stream));
  return Status::Ok();
}

}  // namespace loom
