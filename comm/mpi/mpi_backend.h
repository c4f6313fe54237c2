// MPI backend for CPU ranks. One MpiRuntime per process initialises MPI (MPI_THREAD_MULTIPLE),
// owns the communication thread that runs every queued operation with non-blocking MPI calls,
// and creates communicators for groups of world ranks.
//
// Overlap: compute threads only enqueue; the communication thread runs operations in issue order.
// Collectives run as blocking MPI calls on that thread (OpenMPI's tuned blocking algorithms are
// about twice as fast here as its non-blocking ones); point-to-point transfers are non-blocking
// and polled (MPI progresses only inside MPI calls), so a send and a receive can be outstanding
// together. Collectives are therefore serialised per process in issue order, which every rank
// shares (SPMD), so they cannot deadlock across groups. A hung peer blocks the thread; waiters
// still return at their deadline and the job is then aborted (MpiRuntime::Abort). From that
// deadline on, the rank starts no new MPI operation: queued and later operations fail at once,
// posted receives are cancelled, and communicators are not freed (Communicator::Abandoned).
//
// Tunables: LOOM_COMM_TIMEOUT_MS (default 30000) is every communicator's default deadline.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/trace.h"
#include "core/status.h"

namespace loom {

class MpiEngine;  // the communication thread and its queue (mpi_runtime.cc)

// True when this process was started as one rank of an MPI job (mpirun, srun --mpi=pmix), from
// the launcher's environment; MPI itself need not be initialised.
bool LaunchedByMpi();

class MpiRuntime {
 public:
  // Initialises MPI; call once per process before any other MPI use.
  static Result<std::unique_ptr<MpiRuntime>> Init(int* argc, char*** argv);
  // Stops the communication thread and finalises MPI. Outstanding operations must be complete;
  // after an abandonment MPI is not finalised (call Abort).
  ~MpiRuntime();

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // Ranks on this host (from OMPI_COMM_WORLD_LOCAL_SIZE; 1 if unknown), for the thread budget.
  int local_size() const { return local_size_; }

  // The world as a communicator named "world".
  Result<std::unique_ptr<Communicator>> World();
  // A communicator over `members` (world ranks, increasing group rank order). Only the members
  // call it, all with the same list and name, in the same order relative to their other group
  // creations. This rank must be a member.
  Result<std::unique_ptr<Communicator>> CreateGroup(const std::string& name,
                                                    const std::vector<int>& members);

  TraceRing& trace() { return trace_; }

  // True once a wait passed its deadline (see Communicator::Abandoned).
  bool abandoned() const;

  // Ends the job at once on every rank (MPI_Abort): used after a deadline expired, when
  // outstanding MPI operations can no longer be completed or cancelled.
  [[noreturn]] void Abort(int code);

 private:
  MpiRuntime() = default;
  int world_rank_ = 0, world_size_ = 1, local_size_ = 1;
  std::chrono::milliseconds timeout_{30000};
  TraceRing trace_;
  std::shared_ptr<MpiEngine> engine_;
};

}  // namespace loom
