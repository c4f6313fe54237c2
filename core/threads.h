// Thread budget of a process. Loom runs all CPU parallelism on one OpenMP pool of `n` threads and
// keeps OpenBLAS single-threaded (kernels split GEMMs across the pool themselves), so BLAS
// threads and OpenMP threads never compete for the same cores.
//
// Tunables: LOOM_THREADS overrides the default of (hardware threads / ranks on this host).
#pragma once

#include <cstdint>

#include "core/tunables.h"

namespace loom {

extern const IntTunable kThreadsTunable;  // LOOM_THREADS: threads per rank, 1 to 4096

// Applies the budget: omp_set_num_threads(n), openblas_set_num_threads(1), and sets
// flush-to-zero/denormals-are-zero on the pool threads (x86). n >= 1.
void ConfigureThreads(int n);
// The budget last configured (1 before ConfigureThreads).
int NumThreads();
// LOOM_THREADS if set and valid, else max(1, hardware_concurrency / local_ranks).
int DefaultThreads(int local_ranks);
// Keeps OpenBLAS single-threaded and stops the server threads its pthread build starts when the
// library loads: they are never given work (see above) but spin in sched_yield for ~0.1 s of a
// core first, which a short command (loom ckpt, loom plan) pays in full. Called first thing in
// main and by ConfigureThreads; a no-op for other BLAS builds.
void StopBlasServerThreads();

// The calling thread's CPU time, in ns (CLOCK_THREAD_CPUTIME_ID): the work a thread did, which a
// shared machine's scheduler does not stretch as it does wall-clock time.
int64_t ThreadCpuNs();

// Names the calling thread as `top -H`, `ps -L` and debuggers show it (at most 15 characters,
// longer names are cut): every long-lived thread of a worker has one, so that an operator can
// tell the training thread from the communication, reporting and saving threads by their CPU
// time. Best effort: a failure leaves the inherited name.
void SetThreadName(const char* name);

}  // namespace loom
