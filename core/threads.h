// Thread budget of a process. Loom runs all CPU parallelism on one OpenMP pool of `n` threads and
// keeps OpenBLAS single-threaded (kernels split GEMMs across the pool themselves), so BLAS
// threads and OpenMP threads never compete for the same cores.
//
// Tunables: LOOM_THREADS overrides the default of (hardware threads / ranks on this host).
#pragma once

namespace loom {

// Applies the budget: omp_set_num_threads(n), openblas_set_num_threads(1), and sets
// flush-to-zero/denormals-are-zero on the pool threads (x86). n >= 1.
void ConfigureThreads(int n);
// The budget last configured (1 before ConfigureThreads).
int NumThreads();
// LOOM_THREADS if set and valid, else max(1, hardware_concurrency / local_ranks).
int DefaultThreads(int local_ranks);

}  // namespace loom
