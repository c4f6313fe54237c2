// Local backend (comm/backend.h, BackendKind::kLocal): the ranks of a world as threads of one
// process, over an in-memory transport with the MPI backend's semantics, so that unit tests of
// collectives, and of what is built on them, run in plain gtest without mpirun:
//   - every call runs on one communication thread per rank, in issue order; a collective blocks
//     that thread until every member has arrived (a member that never arrives blocks it, and the
//     waiters get DeadlineExceeded at their deadline, as with MPI); a send is buffered and
//     completes at once; a receive is posted and matched by (peer, tag) in issue order;
//   - calls are checked and traced by the communicator front (deadlines, errors, trace records
//     and the abandonment are the same code as for MPI);
//   - members that disagree on a collective (op, dtype, count, root) all get an error naming both;
//   - host memory only (CanServe(kCpu)); reductions of every carried dtype (comm/reduce.h).
// Contributions are copied when a member arrives and each rank's thread writes only its own
// buffers, so a rank's backend can be torn down at any time, even after an abandonment: its
// thread leaves the call it is blocked in without touching the caller's buffers.
#pragma once

#include <memory>
#include <vector>

#include "comm/backend.h"
#include "core/status.h"

namespace loom {

// `size` backends, one per world rank (index = world rank), sharing one in-memory world. A rank's
// backend is meant for its own thread(s); Abort ends the process, so every rank.
Result<std::vector<std::shared_ptr<Backend>>> CreateLocalWorld(int size,
                                                               const BackendOptions& options = {});

}  // namespace loom
