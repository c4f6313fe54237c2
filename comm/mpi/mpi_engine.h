// The MPI backend's communication thread: runs every queued call of this process in issue order.
//
// Overlap: compute threads only enqueue. Collectives run as blocking MPI calls on this thread
// (OpenMPI's tuned blocking algorithms are about twice as fast here as its non-blocking ones);
// point-to-point transfers are non-blocking and polled (MPI progresses only inside MPI calls),
// so a send and a receive can be outstanding together. Collectives are therefore serialised per
// process in issue order, which every rank shares (SPMD), so they cannot deadlock across groups.
// A hung peer blocks the thread; waiters still return at their deadline (comm/call.h) and the job
// is then aborted. From that deadline on, the thread starts no new MPI operation: queued and
// later calls fail at once, and posted receives are cancelled.
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/call.h"
#include "core/status.h"

namespace loom {

// "<what>: <MPI's error string>".
Status MpiError(int rc, const std::string& what);

class MpiEngine {
 public:
  struct Op {
    // Issues the MPI call. Point-to-point calls are non-blocking and leave a request to poll;
    // collectives run the blocking call and leave MPI_REQUEST_NULL.
    std::function<int(MPI_Request*)> start;
    std::shared_ptr<CommCall> call;
    bool cancel = false;  // a receive: cancelled after an abandonment
    MPI_Request request = MPI_REQUEST_NULL;
  };

  explicit MpiEngine(std::shared_ptr<RankContext> ctx);
  // Stops and joins the thread. Calls still queued are dropped: owners wait for their calls
  // first. Never reached after an abandonment: the owners leak the engine then (the thread may
  // be blocked inside MPI for good).
  ~MpiEngine();
  MpiEngine(const MpiEngine&) = delete;
  MpiEngine& operator=(const MpiEngine&) = delete;

  void Submit(Op op);

 private:
  void Abandon(std::deque<Op>* fresh, std::vector<Op>* inflight);
  // Starts the calls of `fresh` in order; false when the rank gave up meanwhile.
  bool StartAll(std::deque<Op>* fresh, std::vector<Op>* inflight);
  // Completes the finished transfers of `inflight`; true if any.
  bool Poll(std::vector<Op>* inflight);
  void Run();

  const std::shared_ptr<RankContext> ctx_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Op> queue_;  // GUARDED_BY(mu_)
  bool stop_ = false;     // GUARDED_BY(mu_)
  std::thread thread_;    // last: started once the members above exist
};

}  // namespace loom
