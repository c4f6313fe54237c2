// MPI backend for CPU ranks (comm/backend.h, BackendKind::kMpi). One per process: it initialises
// MPI (MPI_THREAD_MULTIPLE), owns the communication thread that runs every call (mpi_engine.h),
// and creates groups with MPI_Comm_create_group (the world with MPI_Comm_dup).
//
// dtypes: F32, I32 and U8 map to MPI's types and reductions; BF16 and F16 travel as 16-bit
// integers and reduce with MPI operations of this backend (comm/reduce.h), since MPI has no type
// for them. Devices: host memory only (CanServe(kCpu)).
//
// After a deadline the backend starts no new MPI operation, frees neither a communicator nor the
// communication thread, and does not finalize MPI: the timed-out call may still be inside MPI.
// The job is then ended with Abort (MPI_Abort).
//
// Tunables: LOOM_COMM_TIMEOUT_MS (default 30000), every call's default deadline.
#pragma once

#include <memory>

#include "comm/backend.h"
#include "core/status.h"

namespace loom {

// True when this process was started as one rank of an MPI job (mpirun, srun --mpi=pmix), from
// the launcher's environment; MPI itself need not be initialised.
bool LaunchedByMpi();

// Initialises MPI and creates the backend (CreateBackend(kMpi) does this).
Result<std::shared_ptr<Backend>> CreateMpiBackend(const BackendOptions& options);

}  // namespace loom
