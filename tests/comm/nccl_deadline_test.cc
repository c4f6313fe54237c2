// The NCCL backend when a member stops taking part: every wait has a deadline on GPU ranks too.
// After one healthy all-reduce the last rank skips the next; each other rank's wait must end at
// its deadline with DeadlineExceeded naming the call, its group and members; the rank's NCCL
// communicators are then aborted, so no kernel is left waiting on the device for the lost peer
// (cudaDeviceSynchronize returns); and the next call fails at once, naming the one that timed
// out. The ranks meet again over the MPI bootstrap, which the NCCL backend's abandonment leaves
// alone. Run under mpirun with two ranks; skipped without a GPU or with one rank. Where ranks
// outnumber the GPUs they share them, connected by NCCL as nodes (nccl_test_util.h).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "comm/nccl/nccl_backend.h"
#include "tests/comm/nccl_test_util.h"
#include "tests/core/cuda_test_util.h"
#include "tests/mpi_test_main.h"

namespace loom {
namespace {

CommBuffer Buffer(const testing::DeviceBuffer<float>& d) {
  return {d.get(), static_cast<int64_t>(d.size()), DType::kF32, Device::kCuda};
}

TEST(NcclDeadline, AMemberThatStopsIsNamedAtTheDeadline) {
  const int gpus = testing::NcclTestGpuCount();
  if (gpus == 0) GTEST_SKIP() << "needs a GPU: none on this machine";
  Backend& boot = testing::Mpi();
  const int size = boot.world_size(), rank = boot.world_rank();
  if (size < 2) GTEST_SKIP() << "needs two ranks: " << size << " here";
  if (gpus < size) {  // before any NCCL call
    ASSERT_TRUE(testing::ShareGpusAsNodes(rank, size, gpus)) << "setting NCCL_HOSTID failed";
  }
  LOOM_ASSERT_OK_AND_ASSIGN(const int device, NcclDeviceForThisRank());
  ASSERT_GE(device, 0);
  // The default timeout bounds the communicators' set-up and first connection (slow where ranks
  // take turns on one GPU) and, when the backend goes, the stopped rank's finalizing of the
  // communicator whose peer gave up (then aborted): 20 s, within the test's 120.
  BackendOptions options;
  options.timeout = std::chrono::milliseconds(20000);
  LOOM_ASSERT_OK_AND_ASSIGN(auto backend, CreateNcclBackendOver(boot.shared_from_this(), options));
  LOOM_ASSERT_OK_AND_ASSIGN(auto world, backend->World());
  LOOM_ASSERT_OK_AND_ASSIGN(auto healthy,
                            testing::DeviceBuffer<float>::From(std::vector<float>(1024, 1.0f)));
  LOOM_ASSERT_OK(world->AllReduce(Buffer(healthy)));
  LOOM_ASSERT_OK_AND_ASSIGN(std::vector<float> sum, healthy.Download());
  ASSERT_EQ(sum[0], static_cast<float>(size));
  ASSERT_EQ(sum[1023], static_cast<float>(size));

  if (rank != size - 1) {
    // The abandoned call's buffer is never freed (communicator.h: it may still be written).
    auto* kept = new testing::DeviceBuffer<float>();
    LOOM_ASSERT_OK_AND_ASSIGN(*kept,
                              testing::DeviceBuffer<float>::From(std::vector<float>(1024, 1.0f)));
    CallOptions o;
    o.deadline = Clock::now() + std::chrono::milliseconds(2000);
    const Status st = world->AllReduce(Buffer(*kept), ReduceOp::kSum, o);
    ASSERT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
    const std::string call =
        "all_reduce #1 on group '" + world->name() + "' " + FormatMembers(world->members());
    EXPECT_NE(st.message().find(call + " (4096 bytes) did not complete within"), std::string::npos)
        << st.ToString();
    EXPECT_NE(st.message().find("(world rank " + std::to_string(rank) +
                                " waiting; a member is hung or dead)"),
              std::string::npos)
        << st.ToString();
    // The communicators were aborted: nothing is left running on the device.
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const Status next = world->AllReduce(Buffer(healthy));
    ASSERT_EQ(next.code(), StatusCode::kFailedPrecondition) << next.ToString();
    EXPECT_NE(next.message().find(call + " passed its deadline on this rank"), std::string::npos)
        << next.ToString();
    EXPECT_TRUE(world->Abandoned());
  } else {
    EXPECT_FALSE(world->Abandoned());
  }
  // Every rank meets again over the bootstrap.
  LOOM_ASSERT_OK_AND_ASSIGN(auto boot_world, boot.World());
  LOOM_ASSERT_OK(boot_world->Barrier());
}

}  // namespace
}  // namespace loom
