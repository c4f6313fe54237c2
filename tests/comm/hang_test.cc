// Fault test program: rank LOOM_TEST_HANG_RANK stops participating (sleeps instead of calling
// the collective). On 4 ranks (tp groups [0, 1] [2, 3], dp groups [0, 2] [1, 3]) every other
// rank then issues dp all_reduce #3 and, behind it, tp all_reduce #0 and #1:
// - a rank whose wait expires must say which operation, group, members and sequence number;
// - rank 3's tp operations never start (its communication thread is blocked in dp #3 with the
//   hung rank): the error of #0, which times out first, names that call; the wait for #1,
//   queued before that deadline, fails at once without starting;
// - after a deadline the next operation fails at once without starting, naming the first
//   operation that timed out (which may still be inside MPI);
// then the hung rank's dp peer aborts the job.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "comm/backend.h"
#include "parallel/layout.h"

int main(int argc, char** argv) {
  auto rt = loom::CreateBackend(loom::BackendKind::kMpi, {.argc = &argc, .argv = &argv});
  if (!rt.ok()) return 1;
  const int hang =
      std::atoi(std::getenv("LOOM_TEST_HANG_RANK") ? std::getenv("LOOM_TEST_HANG_RANK") : "1");
  const int r = (*rt)->world_rank();
  loom::Layout l{.tp = 2, .dp = (*rt)->world_size() / 2};
  auto dp = (*rt)->CreateGroup("dp", l.GroupOf(loom::GroupKind::kData, r));
  auto tp = (*rt)->CreateGroup("tp", l.GroupOf(loom::GroupKind::kTensor, r));
  if (!dp.ok() || !tp.ok()) return 1;
  std::vector<float> buf(1024, 1.f);
  for (int step = 0; step < 3; ++step) {  // three healthy collectives first: seq 0, 1, 2
    if (!(*dp)->AllReduce(buf.data(), 1024).ok()) return 1;
  }
  if (r == hang) {
    std::fprintf(stderr, "rank %d: stopping participation (test mode)\n", r);
    std::this_thread::sleep_for(std::chrono::hours(1));  // killed by the others' abort
  }
  loom::HandlePtr dp3 = (*dp)->AllReduceAsync(buf.data(), 1024, loom::ReduceOp::kSum);
  // Both queued behind dp #3 before any deadline passed.
  std::vector<float> small(2, 1.f);
  loom::HandlePtr tp0h = (*tp)->AllReduceAsync(small.data(), 1, loom::ReduceOp::kSum);
  loom::HandlePtr tp1 = (*tp)->AllReduceAsync(small.data() + 1, 1, loom::ReduceOp::kSum);
  loom::Status tp0 = tp0h->Wait((*tp)->DefaultDeadline());
  loom::Status st = dp3->Wait((*dp)->DefaultDeadline());
  // Never started, and the thread that would start it is blocked in dp #3: its waiter must
  // learn that at once, not at its own deadline.
  loom::Status st1 = tp1->Wait((*tp)->DefaultDeadline());
  std::fprintf(stderr, "rank %d: dp: %s\nrank %d: tp: %s\nrank %d: tp1: %s\n", r,
               st.ToString().c_str(), r, tp0.ToString().c_str(), r, st1.ToString().c_str());
  loom::Status next = (*dp)->AllReduce(buf.data(), 1024);
  std::fprintf(stderr, "rank %d: next: %s\n", r, next.ToString().c_str());
  std::fflush(stderr);
  // The hung rank's dp peer reports last (two deadlines in a row): it ends the job.
  const std::vector<int>& peers = (*dp)->members();
  if (std::find(peers.begin(), peers.end(), hang) == peers.end()) {
    std::this_thread::sleep_for(std::chrono::hours(1));  // wait for the abort
  }
  (*rt)->Abort(3);
}
