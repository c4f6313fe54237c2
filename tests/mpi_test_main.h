// main() for GoogleTest programs that run under mpirun: initialises MPI through MpiRuntime, runs
// the tests on every rank (only rank 0 prints), and fails the job if any rank failed.
#pragma once

#include "comm/mpi/mpi_runtime.h"

namespace loom::testing {
// Valid while the tests run.
MpiRuntime& Mpi();
}  // namespace loom::testing
