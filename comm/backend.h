// Communication backends: the interface every backend implements, and the factory that creates
// one by kind. One folder per backend:
//   kMpi    comm/mpi/    CPU ranks of an MPI job (mpirun, srun --mpi=pmix), one per process;
//   kLocal  comm/local/  ranks as threads of one process over an in-memory transport with the
//                        same semantics (issue order, deadlines, per-call trace), so that unit
//                        tests of collectives run in plain gtest without mpirun;
//   kNccl   comm/nccl/   GPU ranks, one per GPU, device buffers (built where CUDA and NCCL are).
//
// A backend is one rank's view of a world: its rank and size, the world as a communicator,
// groups created from member lists, whether it can serve a device, the abandonment (a wait passed
// its deadline: communicator.h) and Abort, and this rank's call trace (comm/trace.h). Calls go
// through the Communicator front, which traces them; a backend implements only the transport of
// a group (comm/call.h: GroupTransport) and reports each call's start and end through it.
//
// Lifetime: backends are shared (std::shared_ptr), and every communicator holds its backend, so
// a backend is torn down (MPI finalized) only after its last communicator, whatever order the
// owners drop them in. Tear-down runs in the thread that drops the last reference: for MPI, keep
// that the main thread. Thread-safety: every member may be called from any thread, but group
// creation is collective (the members create their groups in the same order).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/trace.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/tunables.h"

namespace loom {

// LOOM_COMM_TIMEOUT_MS (default 30000): the deadline of a call that gives none.
extern const IntTunable kCommTimeoutTunable;

enum class BackendKind { kMpi, kLocal, kNccl };
const char* BackendKindName(BackendKind kind);  // "mpi", "local", "nccl"

struct BackendOptions {
  // kMpi: the program's arguments, for MPI_Init_thread (may stay null).
  int* argc = nullptr;
  char*** argv = nullptr;
  // Every call's deadline when its options give none, from its issue. Absent:
  // LOOM_COMM_TIMEOUT_MS (default 30000).
  std::optional<std::chrono::milliseconds> timeout = std::nullopt;
};

class GroupTransport;
class RankContext;

class Backend : public std::enable_shared_from_this<Backend> {
 public:
  virtual ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  virtual BackendKind kind() const = 0;
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  // Ranks of this world on this host (for the thread budget); 1 when unknown.
  virtual int local_size() const { return 1; }
  // Whether calls may use buffers on `device` (gloo's and NCCL's canConnect).
  virtual bool CanServe(Device device) const = 0;

  // The world as a communicator named "world" (collective over the world).
  Result<std::shared_ptr<Communicator>> World();
  // A communicator over `members` (distinct world ranks, in group rank order). Collective among
  // the members: only they call it, all with the same list and name, in the same order relative
  // to their other group creations. This rank must be a member.
  Result<std::shared_ptr<Communicator>> CreateGroup(const std::string& name,
                                                    const std::vector<int>& members);

  // True once a wait of this rank passed its deadline (Communicator::Abandoned).
  bool Abandoned() const;
  // The job is being stopped for `why` (the coordinator named a culprit): every wait of this
  // rank ends with an error saying so, and no call starts any more (call.h: RankContext).
  void Cancel(const std::string& why);
  // Ends the job at once on every rank: used after a deadline expired, when outstanding
  // operations can no longer be completed or cancelled.
  [[noreturn]] virtual void Abort(int code) = 0;

  // This rank's per-call trace.
  CallTrace& trace();
  std::chrono::milliseconds default_timeout() const;

 protected:
  Backend(int world_rank, int world_size, std::chrono::milliseconds timeout);
  // The backend's part of a group's creation, after the membership checks. `world`: the whole
  // world in rank order, as World() asks.
  virtual Result<std::unique_ptr<GroupTransport>> NewGroup(const std::string& name,
                                                           const std::vector<int>& members,
                                                           bool world) = 0;
  const std::shared_ptr<RankContext>& context() const { return ctx_; }

 private:
  Result<std::shared_ptr<Communicator>> Make(const std::string& name, std::vector<int> members,
                                             bool world);

  const int world_rank_, world_size_;
  std::shared_ptr<RankContext> ctx_;
};

// Creates this process's backend of `kind`. kMpi initialises MPI (once per process, before any
// other MPI use). kLocal: a world of one rank (comm/local/local_backend.h makes larger ones).
// kNccl: selects this rank's GPU and bootstraps over a new MPI backend (Unimplemented in a build
// without NCCL).
Result<std::shared_ptr<Backend>> CreateBackend(BackendKind kind,
                                               const BackendOptions& options = {});

// The default timeout `options` asks for (for backends).
Result<std::chrono::milliseconds> DefaultTimeout(const BackendOptions& options);

}  // namespace loom
