// Collective bandwidth of Loom's communicator (queued to the communication thread, non-blocking
// MPI underneath) against a plain blocking MPI_Allreduce loop on the same buffers, in one run.
// Run: mpirun -np 2 build/bench/comm_bench. Last line: comm_allreduce_ratio=<loom/mpi at 64 MiB>.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "comm/backend.h"

namespace {
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  auto rt = loom::CreateBackend(loom::BackendKind::kMpi, {.argc = &argc, .argv = &argv});
  if (!rt.ok()) return 1;
  auto world = (*rt)->World();
  if (!world.ok()) return 1;
  loom::Communicator& comm = **world;
  const int n = comm.size(), rank = comm.rank();
  double last_ratio = 0;
  if (rank == 0) {
    std::printf("all-reduce, %d ranks: bus bandwidth = 2(n-1)/n * bytes / time (median of reps)\n",
                n);
    std::printf("%10s %14s %14s %8s\n", "MiB", "loom GB/s", "MPI GB/s", "ratio");
  }
  for (int64_t mib : {1, 4, 16, 64}) {
    const int64_t count = mib * 1024 * 1024 / 4;
    std::vector<float> buf(static_cast<size_t>(count), 1.0f);
    const int reps = mib >= 16 ? 8 : 20;
    std::vector<double> loom_s, mpi_s;
    for (int r = 0; r < reps + 2; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      auto t0 = std::chrono::steady_clock::now();
      if (!comm.AllReduce(buf.data(), count).ok()) return 1;
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r >= 2) loom_s.push_back(s);
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = std::chrono::steady_clock::now();
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r >= 2) mpi_s.push_back(s);
    }
    const double bytes = 2.0 * (n - 1) / n * static_cast<double>(count) * 4;
    const double lg = bytes / Median(loom_s) / 1e9, mg = bytes / Median(mpi_s) / 1e9;
    last_ratio = lg / mg;
    if (rank == 0) std::printf("%10lld %14.2f %14.2f %8.3f\n", (long long)mib, lg, mg, lg / mg);
  }
  if (rank == 0) std::printf("comm_allreduce_ratio=%.3f\n", last_ratio);
  return 0;
}
