// The small votes the checkpoint protocols take over the world: the maximum of one integer per
// rank (who failed, who is still writing, who got a stop signal), blocking or started after one
// step and read after the next, and rank 0's list broadcast to every rank (the restore
// candidates).
//
// Abandonment (comm/communicator.h): after a timed-out wait the communication thread may still
// write into a vote's buffer, so the buffers live on the heap and are never freed once the
// communicator has abandoned operations: the destructor then leaves them allocated.
//
// Thread-safety: one WorldVote is used from one thread (the training thread). Every call is
// collective: all ranks make the same calls in the same order.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"

namespace loom {

class WorldVote {
 public:
  // `world`: every rank's communicator (null: one process); must outlive the vote.
  explicit WorldVote(Communicator* world);
  // Waits for a vote still in flight (unless communication was abandoned; then its buffer is
  // kept, as the class comment says).
  ~WorldVote();
  WorldVote(const WorldVote&) = delete;
  WorldVote& operator=(const WorldVote&) = delete;

  // Blocking: the maximum of `v` over the world (`v` itself for one process), within
  // LOOM_CKPT_TIMEOUT_MS rather than the communicator's deadline: ranks reach these votes after
  // local I/O of very different lengths (deleting leftovers, loading, writing). `v` must be
  // exact as a float (|v| < 2^24).
  Result<int> Max(int v);

  // Non-blocking, one at a time, with a world: Start begins the maximum of `v`; Take waits for
  // it with the communicator's default deadline (a vote started after one step is read after the
  // next: every rank has passed the start by then, so the wait returns at once) and returns the
  // result. A failed Take keeps the vote (the destructor waits for it again).
  void Start(int v);
  bool started() const { return handle_ != nullptr; }
  Result<int> Take();

  // Blocking: replaces *data by world rank 0's (every rank passes as many floats), within
  // LOOM_CKPT_TIMEOUT_MS. Nothing to do for one process.
  Status Broadcast(std::vector<float>* data);

 private:
  struct Buffers {
    float max = 0;               // Max's
    float started = 0;           // Start's
    std::vector<float> listing;  // Broadcast's
  };
  Communicator* world_;
  HandlePtr handle_;  // the vote Start began
  std::unique_ptr<Buffers> bufs_ = std::make_unique<Buffers>();
};

}  // namespace loom
