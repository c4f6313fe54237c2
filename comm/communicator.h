// Communicator: collectives and point-to-point transfers among the members of one group
// (a tensor-, data-, pipeline- or context-parallel group, or the world).
//
// Every operation has an asynchronous form returning a CommHandle, and a blocking form that waits
// with the communicator's default timeout. Every wait has a deadline: on expiry the error names
// the operation, the group, its members (world ranks) and the sequence number, e.g.
//   DeadlineExceeded: all_reduce #17 on group 'dp' [0, 2, 4, 6] (4096 bytes) did not complete
//   within 30000 ms (rank 2 waiting; a member is hung or dead)
// Operations on one communicator must be issued in the same order on every member (as in MPI and
// NCCL). Buffers must stay valid and untouched until the handle completes.
//
// After a deadline: the operation that timed out cannot be cancelled, and it may still read and
// write its buffers when the late member arrives. The backend then starts nothing more (later
// operations fail at once, naming the one that timed out) and Abandoned() turns true; whoever
// owns buffers of unfinished operations must then keep them (never free them) until the job is
// aborted. The blocking forms but Send keep buffers of up to kStagedFloats floats safe by
// themselves (a heap copy), so a small stack variable may be passed to them.
//
// Thread-safety: issuing calls and waiting may happen from any thread; operations are executed in
// issue order by the backend's communication thread, so compute continues while they run.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/trace.h"
#include "core/status.h"

namespace loom {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

enum class ReduceOp { kSum, kMax };

// Completion handle of one asynchronous operation.
class CommHandle {
 public:
  virtual ~CommHandle() = default;
  // Blocks until the operation completes or `deadline` passes (then DeadlineExceeded naming the
  // op, group, members and sequence number). The operation's trace record is written on the first
  // Wait that returns.
  virtual Status Wait(Deadline deadline) = 0;
  virtual bool Done() const = 0;
};
using HandlePtr = std::shared_ptr<CommHandle>;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;  // rank inside this group
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;
  virtual const std::vector<int>& members() const = 0;  // world ranks, by group rank

  // In-place all-reduce of n floats.
  virtual HandlePtr AllReduceAsync(float* data, int64_t n, ReduceOp op) = 0;
  // in: size() * n_per_rank floats; out: n_per_rank floats, the sum of every member's chunk rank().
  virtual HandlePtr ReduceScatterAsync(const float* in, float* out, int64_t n_per_rank) = 0;
  // in: n_per_rank floats; out: size() * n_per_rank floats, member r's chunk at r * n_per_rank.
  // In place when in == out + rank() * n_per_rank.
  virtual HandlePtr AllGatherAsync(const float* in, float* out, int64_t n_per_rank) = 0;
  virtual HandlePtr BroadcastAsync(float* data, int64_t n, int root) = 0;
  // Point-to-point to / from a group rank. Matching is by (peer, tag) in issue order.
  virtual HandlePtr SendAsync(const float* data, int64_t n, int peer, int tag) = 0;
  virtual HandlePtr RecvAsync(float* data, int64_t n, int peer, int tag) = 0;
  virtual HandlePtr BarrierAsync() = 0;

  // Blocking forms: the asynchronous call, then Wait(now + timeout()).
  Status AllReduce(float* data, int64_t n, ReduceOp op = ReduceOp::kSum);
  Status ReduceScatter(const float* in, float* out, int64_t n_per_rank);
  Status AllGather(const float* in, float* out, int64_t n_per_rank);
  Status Broadcast(float* data, int64_t n, int root);
  Status Send(const float* data, int64_t n, int peer, int tag = 0);
  Status Recv(float* data, int64_t n, int peer, int tag = 0);
  Status Barrier();

  // True once a wait on any communicator of this process passed its deadline (see above).
  virtual bool Abandoned() const { return false; }

  // Blocking forms copy buffers of up to this many floats to the heap (left there after a timeout).
  static constexpr int64_t kStagedFloats = 64;

  std::chrono::milliseconds timeout() const { return timeout_; }
  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  Deadline DefaultDeadline() const { return Clock::now() + timeout_; }

 protected:
  std::chrono::milliseconds timeout_{30000};  // LOOM_COMM_TIMEOUT_MS
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
