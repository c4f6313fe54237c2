// main() for GoogleTest programs that run under mpirun: creates the MPI backend (comm/backend.h),
// runs the tests on every rank (only rank 0 prints), and fails the job if any rank failed.
#pragma once

#include "comm/backend.h"

namespace loom::testing {
// The process's MPI backend; valid while the tests run.
Backend& Mpi();
}  // namespace loom::testing
