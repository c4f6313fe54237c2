// main() for GoogleTest programs that run under mpirun: creates the MPI backend (comm/backend.h),
// runs the tests on every rank (only rank 0 prints, unless LOOM_TEST_EVERY_RANK_PRINTS=1), and
// fails the job if any rank failed. Started
// without mpirun, the backend is a local world of one rank (no MPI at all).
#pragma once

#include "comm/backend.h"

namespace loom::testing {
// The process's backend (MPI, or local without mpirun); valid while the tests run.
Backend& Mpi();
}  // namespace loom::testing
