// The NCCL backend with more than one rank and no mpirun: every GPU of the machine is a rank, the
// ranks are threads of this process, bootstrapped over the local backend (comm/local/) instead of
// MPI. The same semantics as nccl_backend_test.cc's multi-rank cases (collectives on f32 and bf16,
// a point-to-point ring), for machines that have several GPUs but no Open MPI runtime
// (the GPU machines lent to this project carry CUDA and PyTorch, not mpirun). Skipped, saying why,
// with fewer than two GPUs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "comm/local/local_backend.h"
#include "comm/nccl/nccl_backend.h"
#include "core/half.h"
#include "tests/comm/nccl_test_util.h"
#include "tests/core/cuda_test_util.h"

namespace loom {
namespace {

// What a rank's check found wrong ("" when nothing).
using RankCheck = std::function<std::string(int rank, int size, Communicator& world)>;

using testing::DeviceBuffer;

// The device buffer as a communication buffer.
template <typename T>
CommBuffer Buffer(const DeviceBuffer<T>& d, DType dtype) {
  return {d.get(), static_cast<int64_t>(d.size()), dtype, Device::kCuda};
}

// The first element at which the device buffer differs from `want`, or "".
template <typename T>
std::string Mismatch(const DeviceBuffer<T>& d, const std::vector<T>& want, const char* what) {
  Result<std::vector<T>> got = d.Download();
  if (!got.ok()) return std::string(what) + ": " + got.status().ToString();
  for (size_t i = 0; i < want.size(); ++i) {
    if (!((*got)[i] == want[i])) {
      return std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string((*got)[i]) +
             ", want " + std::to_string(want[i]);
    }
  }
  return "";
}

// Runs `check` on every GPU as one rank of an NCCL world (a thread each); returns one line per
// rank that failed, naming it.
std::string RunOnEveryGpu(const RankCheck& check) {
  const int size = testing::NcclTestGpuCount();
  auto local = CreateLocalWorld(size);
  if (!local.ok()) return "local world: " + local.status().ToString();
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      std::string& err = errors[static_cast<size_t>(r)];
      if (cudaSetDevice(r) != cudaSuccess) {
        err = "cudaSetDevice failed";
        return;
      }
      auto backend = CreateNcclBackendOver((*local)[static_cast<size_t>(r)]);
      if (!backend.ok()) {
        err = "backend: " + backend.status().ToString();
        return;
      }
      auto world = (*backend)->World();
      if (!world.ok()) {
        err = "world: " + world.status().ToString();
        return;
      }
      err = check(r, size, **world);
      if (err.empty() && cudaDeviceSynchronize() != cudaSuccess) err = "device fault";
    });
  }
  for (std::thread& t : threads) t.join();
  std::string out;
  for (int r = 0; r < size; ++r) {
    if (!errors[static_cast<size_t>(r)].empty()) {
      out += "rank " + std::to_string(r) + ": " + errors[static_cast<size_t>(r)] + "\n";
    }
  }
  return out;
}

#define LOOM_REQUIRE_GPUS()                                                                   \
  if (testing::NcclTestGpuCount() < 2) {                                                      \
    GTEST_SKIP() << "needs two GPUs or more (one rank each): " << testing::NcclTestGpuCount() \
                 << " here";                                                                  \
  }

// A device copy of `host`; on failure an empty buffer, with *err set (if it was empty).
template <typename T>
DeviceBuffer<T> Upload(const std::vector<T>& host, std::string* err) {
  Result<DeviceBuffer<T>> d = DeviceBuffer<T>::From(host);
  if (d.ok()) return std::move(*d);
  if (err->empty()) *err = "upload: " + d.status().ToString();
  return DeviceBuffer<T>();
}

TEST(NcclThreads, AllReduceF32AndBf16) {
  LOOM_REQUIRE_GPUS();
  const std::string errors = RunOnEveryGpu([](int rank, int size, Communicator& world) {
    const int n = 1000;
    std::vector<float> x(n), want(n);
    const float ranks_sum = size * (size + 1) / 2.0f;
    for (int i = 0; i < n; ++i) {
      x[i] = static_cast<float>((rank + 1) * i);
      want[i] = ranks_sum * i;
    }
    // Small integers are exact in bf16, so the sum is too.
    std::vector<uint16_t> h(64), hwant(64);
    for (size_t i = 0; i < h.size(); ++i) {
      h[i] = FloatToBf16(static_cast<float>(i % 8 + rank));
      hwant[i] = FloatToBf16(static_cast<float>(size * (i % 8) + size * (size - 1) / 2));
    }
    std::string err;
    DeviceBuffer<float> d = Upload(x, &err);
    DeviceBuffer<uint16_t> b = Upload(h, &err);
    if (!err.empty()) return err;
    if (Status st = world.AllReduce(Buffer(d, DType::kF32)); !st.ok()) return st.ToString();
    if (Status st = world.AllReduce(Buffer(b, DType::kBF16)); !st.ok()) return st.ToString();
    err = Mismatch(d, want, "sum");
    return err.empty() ? Mismatch(b, hwant, "bf16 sum") : err;
  });
  EXPECT_EQ(errors, "");
}

TEST(NcclThreads, AllGatherReduceScatterBroadcast) {
  LOOM_REQUIRE_GPUS();
  const std::string errors = RunOnEveryGpu([](int rank, int size, Communicator& world) {
    const int per = 5, root = size - 1;
    // Reduce-scatter of [1, 2, ..., per * size] from every rank: rank r keeps size * its chunk.
    std::vector<float> full(per * size), gathered(per * size), scattered(per);
    std::iota(full.begin(), full.end(), 1.0f);
    for (int i = 0; i < per * size; ++i) gathered[i] = static_cast<float>(i / per + 1);
    for (int i = 0; i < per; ++i) scattered[i] = size * full[rank * per + i];
    std::string err;
    DeviceBuffer<float> in = Upload(std::vector<float>(per, static_cast<float>(rank + 1)), &err);
    DeviceBuffer<float> all = Upload(std::vector<float>(per * size, -1.0f), &err);
    DeviceBuffer<float> rs_in = Upload(full, &err);
    DeviceBuffer<float> rs_out = Upload(std::vector<float>(per, 0.0f), &err);
    DeviceBuffer<float> b = Upload(std::vector<float>(7, rank == root ? 42.0f : 0.0f), &err);
    if (!err.empty()) return err;
    for (const Status& st :
         {world.AllGather(Buffer(in, DType::kF32), Buffer(all, DType::kF32)),
          world.ReduceScatter(Buffer(rs_in, DType::kF32), Buffer(rs_out, DType::kF32)),
          world.Broadcast(Buffer(b, DType::kF32), root), world.Barrier()}) {
      if (!st.ok()) return st.ToString();
    }
    for (const std::string& e :
         {Mismatch(all, gathered, "all-gather"), Mismatch(rs_out, scattered, "reduce-scatter"),
          Mismatch(b, std::vector<float>(7, 42.0f), "broadcast")}) {
      if (!e.empty()) return e;
    }
    return std::string();
  });
  EXPECT_EQ(errors, "");
}

TEST(NcclThreads, SendRecvRing) {
  LOOM_REQUIRE_GPUS();
  const std::string errors = RunOnEveryGpu([](int rank, int size, Communicator& world) {
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    std::string err;
    DeviceBuffer<float> out = Upload(std::vector<float>(16, static_cast<float>(rank)), &err);
    DeviceBuffer<float> in = Upload(std::vector<float>(16, -1.0f), &err);
    if (!err.empty()) return err;
    // NCCL matches by order: even ranks send first, odd ranks receive first.
    for (int k = 0; k < 2; ++k) {
      const bool sending = (rank % 2 == 0) == (k == 0);
      const Status st = sending ? world.Send(Buffer(out, DType::kF32), next)
                                : world.Recv(Buffer(in, DType::kF32), prev);
      if (!st.ok()) return st.ToString();
    }
    return Mismatch(in, std::vector<float>(16, static_cast<float>(prev)), "received");
  });
  EXPECT_EQ(errors, "");
}

}  // namespace
}  // namespace loom
