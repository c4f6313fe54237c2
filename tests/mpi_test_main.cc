#include "tests/mpi_test_main.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "comm/local/local_backend.h"
#include "comm/mpi/mpi_backend.h"

namespace loom::testing {
namespace {
Backend* g_runtime = nullptr;
}
Backend& Mpi() {
  return *g_runtime;
}
}  // namespace loom::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Not started by mpirun: a world of one rank on the local backend, so that a machine without
  // Open MPI's runtime (a lent GPU machine) runs the one-rank cases too.
  auto rt = loom::LaunchedByMpi()
                ? loom::CreateBackend(loom::BackendKind::kMpi, {.argc = &argc, .argv = &argv})
                : loom::CreateBackend(loom::BackendKind::kLocal);
  if (!rt.ok()) {
    std::fprintf(stderr, "%s\n", rt.status().ToString().c_str());
    return 1;
  }
  loom::testing::g_runtime = rt->get();
  // Only rank 0 prints, unless LOOM_TEST_EVERY_RANK_PRINTS is set (not "0"): for a run whose
  // output is all there is to go on (a lent GPU machine), every rank's failures.
  const char* every = std::getenv("LOOM_TEST_EVERY_RANK_PRINTS");
  const bool every_rank_prints = every != nullptr && std::strcmp(every, "0") != 0;
  if ((*rt)->world_rank() != 0 && !every_rank_prints) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int result = RUN_ALL_TESTS();
  auto world = (*rt)->World();
  if (!world.ok()) return 1;
  std::shared_ptr<loom::Communicator> w = std::move(*world);
  float failed = static_cast<float>(result != 0);
  if (!w->AllReduce(&failed, 1, loom::ReduceOp::kMax).ok()) return 1;
  w.reset();
  rt->reset();
  return failed != 0 ? 1 : 0;
}
