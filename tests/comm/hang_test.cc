// Fault test program: rank LOOM_TEST_HANG_RANK stops participating (sleeps instead of calling
// the collective). Every other rank must fail within its deadline with an error that names the
// operation, the group, its members and the sequence number, then abort the job.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "comm/mpi/mpi_runtime.h"
#include "parallel/layout.h"

int main(int argc, char** argv) {
  auto rt = loom::MpiRuntime::Init(&argc, &argv);
  if (!rt.ok()) return 1;
  const int hang =
      std::atoi(std::getenv("LOOM_TEST_HANG_RANK") ? std::getenv("LOOM_TEST_HANG_RANK") : "1");
  const int r = (*rt)->world_rank();
  loom::Layout l{.tp = 2, .dp = (*rt)->world_size() / 2};
  auto dp = (*rt)->CreateGroup("dp", l.GroupOf(loom::GroupKind::kData, r));
  if (!dp.ok()) return 1;
  std::vector<float> buf(1024, 1.f);
  for (int step = 0; step < 3; ++step) {  // three healthy collectives first: seq 0, 1, 2
    if (!(*dp)->AllReduce(buf.data(), 1024).ok()) return 1;
  }
  if (r == hang) {
    std::fprintf(stderr, "rank %d: stopping participation (test mode)\n", r);
    std::this_thread::sleep_for(std::chrono::hours(1));  // killed by the others' abort
  }
  loom::Status st = (*dp)->AllReduce(buf.data(), 1024);
  if (st.ok()) {
    std::printf("rank %d: all_reduce #3 completed (not in the hung rank's group)\n", r);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::hours(1));  // wait for the abort
  }
  std::fprintf(stderr, "rank %d: %s\n", r, st.ToString().c_str());
  std::fflush(stderr);
  (*rt)->Abort(3);
}
