// Communicator: collectives and point-to-point transfers among the members of one group (a
// tensor-, data-, pipeline- or context-parallel group, or the world), on any backend
// (comm/backend.h creates them). This class is the front every backend shares: it checks each
// call (dtype, device, counts, peer), numbers it, opens its trace record (comm/trace.h) and hands
// it to the backend; waits, deadlines and their errors are the same whatever runs the call.
//
// Every call takes a typed buffer (comm/buffer.h: pointer, count, dtype f32/bf16/f16/i32/u8,
// device) and options (a deadline and a tag). Every operation has an asynchronous form returning
// a CommHandle and a blocking form that waits until the call's deadline: the one in its options,
// else the backend's default from the call on (LOOM_COMM_TIMEOUT_MS, 30 s). Thin overloads on
// host float* keep the forms that predate typed buffers. On expiry the error names the
// operation, the group, its members (world ranks), the sequence number and the rank waiting:
//   DeadlineExceeded: all_reduce #17 on group 'dp' [0, 2, 4, 6] (4096 bytes) did not complete
//   within 30000 ms (world rank 2 waiting; a member is hung or dead)
// Operations on one communicator must be issued in the same order on every member (as in MPI and
// NCCL). Buffers must stay valid and untouched until the handle completes. A communicator
// refuses a device its backend cannot serve, and a dtype it does not carry, with an error naming
// the call.
//
// After a deadline: the operation that timed out cannot be cancelled, and it may still read and
// write its buffers when the late member arrives. The backend then starts nothing more (later
// operations fail at once, naming the one that timed out) and Abandoned() turns true; whoever
// owns buffers of unfinished operations must then keep them (never free them) until the job is
// aborted. The blocking forms but Send keep buffers of up to kStagedBytes bytes safe by
// themselves (a heap copy), so a small stack variable may be passed to them.
//
// Lifetime: a communicator keeps its backend alive (shared ownership), so it can never outlive
// it; hold communicators through std::shared_ptr or CommPtr. Destroy a communicator only when
// its calls are complete (or abandoned).
// Thread-safety: issuing calls and waiting may happen from any thread; operations are executed in
// issue order by the backend, so compute continues while they run.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/buffer.h"
#include "comm/trace.h"
#include "core/status.h"

namespace loom {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

enum class ReduceOp { kSum, kMax };

// Per-call options.
struct CallOptions {
  // When waiting for the call gives up. Absent: the backend's default timeout from the call on.
  std::optional<Deadline> deadline = std::nullopt;
  // Send/recv: a message is matched with the receive of the same (peer, tag), in issue order.
  // At least 0. Collectives have none (their trace records say -1).
  int tag = 0;
};

// One send or receive of an exchange (Communicator::ExchangeAsync): to or from a group rank,
// matched by (peer, tag) in issue order, as SendAsync and RecvAsync.
struct P2PCall {
  static P2PCall Send(ConstCommBuffer data, int peer, int tag = 0) {
    return {CommOp::kSend, data.data, nullptr, data.count, data.dtype, data.device, peer, tag};
  }
  static P2PCall Recv(CommBuffer data, int peer, int tag = 0) {
    return {CommOp::kRecv, nullptr, data.data, data.count, data.dtype, data.device, peer, tag};
  }

  CommOp op = CommOp::kSend;  // kSend or kRecv
  const void* in = nullptr;   // send: read
  void* out = nullptr;        // recv: written
  int64_t count = 0;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;
  int peer = -1;
  int tag = 0;
};

class CommCall;        // comm/call.h: the call shared by the front, its backend and the trace
class GroupTransport;  // comm/call.h: a backend's side of one group
class RankContext;     // comm/call.h: what the calls of one backend rank share
class Backend;         // comm/backend.h

// Completion handle of one asynchronous operation. Dropping it without a wait is allowed; the
// operation still runs (and its buffers must stay valid until it completes).
class CommHandle {
 public:
  explicit CommHandle(std::shared_ptr<CommCall> call) : call_(std::move(call)) {}
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  ~CommHandle();

  // Blocks until the operation completes or `deadline` passes (then DeadlineExceeded naming the
  // op, group, members and sequence number). The first wait that returns closes the call's trace
  // record.
  Status Wait(Deadline deadline);
  // The same, until the call's own deadline (its options', else the backend's default).
  Status Wait();
  bool Done() const;

 private:
  std::shared_ptr<CommCall> call_;
};
using HandlePtr = std::shared_ptr<CommHandle>;

// Waits for every handle until `deadline` (each of them, also after an error); the first error.
Status WaitAll(const std::vector<HandlePtr>& handles, Deadline deadline);
// The same, each handle until its own call's deadline (CommHandle::Wait()).
Status WaitAll(const std::vector<HandlePtr>& handles);

class Communicator {
 public:
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  // After an abandonment the backend keeps what a timed-out call may still use.
  ~Communicator();

  int rank() const { return rank_; }  // rank inside this group
  int size() const { return static_cast<int>(members_.size()); }
  const std::string& name() const { return name_; }
  const std::vector<int>& members() const { return members_; }  // world ranks, by group rank
  int world_rank() const;

  // --- Typed calls ---
  // In-place all-reduce.
  HandlePtr AllReduceAsync(CommBuffer data, ReduceOp op, const CallOptions& o = {});
  // in: size() * out.count elements; out: the reduction of every member's chunk rank().
  HandlePtr ReduceScatterAsync(ConstCommBuffer in, CommBuffer out, ReduceOp op = ReduceOp::kSum,
                               const CallOptions& o = {});
  // out: size() * in.count elements, member r's chunk at r * in.count. In place when in.data is
  // this rank's chunk of out.
  HandlePtr AllGatherAsync(ConstCommBuffer in, CommBuffer out, const CallOptions& o = {});
  HandlePtr BroadcastAsync(CommBuffer data, int root, const CallOptions& o = {});
  // Point-to-point to / from a group rank, matched by (peer, o.tag) in issue order.
  HandlePtr SendAsync(ConstCommBuffer data, int peer, const CallOptions& o = {});
  HandlePtr RecvAsync(CommBuffer data, int peer, const CallOptions& o = {});
  HandlePtr BarrierAsync(const CallOptions& o = {});
  // Sends and receives issued together, one handle each in order: each is a call of its own
  // (numbered in turn, traced, matched as SendAsync and RecvAsync; its tag its own, the deadline
  // o's), and the backend starts them as one. Where a send or a receive holds a stream until
  // its peer's matching call (NCCL: they are fused into one group), only this form lets an
  // exchange in which every member first receives, then sends (a ring), make progress; the
  // other backends start them in order, as if issued one by one. All or none: when one is
  // refused (a peer out of range, a device the backend cannot serve...), none starts and every
  // handle fails, the refused call's naming why, the others naming it.
  std::vector<HandlePtr> ExchangeAsync(const std::vector<P2PCall>& calls,
                                       const CallOptions& o = {});

  // Blocking forms: the asynchronous call, then a wait until its deadline.
  Status AllReduce(CommBuffer data, ReduceOp op = ReduceOp::kSum, const CallOptions& o = {});
  Status ReduceScatter(ConstCommBuffer in, CommBuffer out, ReduceOp op = ReduceOp::kSum,
                       const CallOptions& o = {});
  Status AllGather(ConstCommBuffer in, CommBuffer out, const CallOptions& o = {});
  Status Broadcast(CommBuffer data, int root, const CallOptions& o = {});
  Status Send(ConstCommBuffer data, int peer, const CallOptions& o = {});
  Status Recv(CommBuffer data, int peer, const CallOptions& o = {});
  Status Barrier(const CallOptions& o = {});

  // --- Host float convenience (the default deadline; p2p with the given tag) ---
  HandlePtr AllReduceAsync(float* data, int64_t n, ReduceOp op);
  HandlePtr ReduceScatterAsync(const float* in, float* out, int64_t n_per_rank);
  HandlePtr AllGatherAsync(const float* in, float* out, int64_t n_per_rank);
  HandlePtr BroadcastAsync(float* data, int64_t n, int root);
  HandlePtr SendAsync(const float* data, int64_t n, int peer, int tag);
  HandlePtr RecvAsync(float* data, int64_t n, int peer, int tag);
  Status AllReduce(float* data, int64_t n, ReduceOp op = ReduceOp::kSum);
  Status ReduceScatter(const float* in, float* out, int64_t n_per_rank);
  Status AllGather(const float* in, float* out, int64_t n_per_rank);
  Status Broadcast(float* data, int64_t n, int root);
  Status Send(const float* data, int64_t n, int peer, int tag = 0);
  Status Recv(float* data, int64_t n, int peer, int tag = 0);

  // True once a wait on any communicator of this backend rank passed its deadline (see above).
  bool Abandoned() const;

  // Blocking forms copy buffers of up to this many bytes (64 floats) to the heap (left there
  // after a timeout).
  static constexpr int64_t kStagedBytes = 256;

  // The backend's default timeout, and the deadline it gives a call issued now.
  std::chrono::milliseconds default_timeout() const;
  Deadline DefaultDeadline() const { return Clock::now() + default_timeout(); }

 private:
  friend class Backend;
  Communicator(std::shared_ptr<Backend> backend, std::shared_ptr<RankContext> ctx,
               std::unique_ptr<GroupTransport> transport, std::string name,
               std::vector<int> members);

  struct Request;  // one call's description, before it is numbered (communicator.cc)
  // Numbers the call, opens its trace record, and submits it, or completes it with the error
  // when it is refused.
  HandlePtr Issue(const Request& req, const CallOptions& o);
  // Numbers the call and opens its trace record; *refused: why it may not run (Ok: it may).
  std::shared_ptr<CommCall> Prepare(const Request& req, const CallOptions& o, Status* refused);
  Status Check(const Request& req, const CallOptions& o) const;

  // Order matters: the transport goes before the backend it belongs to.
  std::shared_ptr<Backend> backend_;
  std::shared_ptr<RankContext> ctx_;
  std::unique_ptr<GroupTransport> transport_;
  std::string name_;
  std::vector<int> members_;
  int rank_ = 0;
  std::atomic<uint64_t> next_seq_{0};
};

// Shared ownership of a communicator (which keeps its backend alive), usable wherever a
// Communicator* is expected for the length of a call. Null: no group (one rank in it).
class CommPtr {
 public:
  CommPtr() = default;
  CommPtr(std::nullptr_t) {}                                         // NOLINT: implicit by design
  CommPtr(std::shared_ptr<Communicator> c) : comm_(std::move(c)) {}  // NOLINT: implicit by design
  operator Communicator*() const { return comm_.get(); }             // NOLINT: implicit by design
  Communicator* operator->() const { return comm_.get(); }
  Communicator& operator*() const { return *comm_; }
  Communicator* get() const { return comm_.get(); }
  const std::shared_ptr<Communicator>& shared() const { return comm_; }

 private:
  std::shared_ptr<Communicator> comm_;
};

// Keeps a function's local buffers alive when an operation on them timed out: registered buffers
// are moved, when the guard ends and communication was abandoned (Communicator::Abandoned), into
// heap objects that are never freed, since the timed-out operation may still write into them.
// Declare the guard after the buffers it guards, so that it ends before they do:
//   std::vector<float> buf(n);
//   KeepIfAbandoned keep(comm);
//   keep(buf);
class KeepIfAbandoned {
 public:
  explicit KeepIfAbandoned(const Communicator* comm) : comm_(comm) {}
  KeepIfAbandoned(const KeepIfAbandoned&) = delete;
  KeepIfAbandoned& operator=(const KeepIfAbandoned&) = delete;
  ~KeepIfAbandoned() {
    if (comm_ == nullptr || !comm_->Abandoned()) return;
    for (auto& keep : keeps_) keep();
  }
  // Guards `buffer` (any movable container whose move keeps its storage: vector, map, Tensor).
  template <class T>
  T& operator()(T& buffer) {
    keeps_.push_back([&buffer] { (void)new T(std::move(buffer)); });  // leaked on purpose
    return buffer;
  }

 private:
  const Communicator* comm_;
  std::vector<std::function<void()>> keeps_;
};

// "[0, 2, 4, 6]"
std::string FormatMembers(const std::vector<int>& members);

}  // namespace loom
