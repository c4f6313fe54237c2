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

namespace loom {
namespace {

// What a rank's check found wrong ("" when nothing).
using RankCheck = std::function<std::string(int rank, int size, Communicator& world)>;

// Device copy of a host vector, on the current device; freed at scope end.
template <typename T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : n_(host.size()) {
    ok_ = cudaMalloc(&ptr_, bytes()) == cudaSuccess &&
          cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice) == cudaSuccess;
  }
  ~DeviceVector() { cudaFree(ptr_); }
  bool ok() const { return ok_; }
  std::vector<T> Host() const {
    std::vector<T> out(n_);
    if (cudaMemcpy(out.data(), ptr_, bytes(), cudaMemcpyDeviceToHost) != cudaSuccess) out.clear();
    return out;
  }
  CommBuffer Buffer(DType dtype) const {
    return {ptr_, static_cast<int64_t>(n_), dtype, Device::kCuda};
  }

 private:
  size_t bytes() const { return n_ * sizeof(T); }
  T* ptr_ = nullptr;
  size_t n_;
  bool ok_ = false;
};

int GpuCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

// Runs `check` on every GPU as one rank of an NCCL world (a thread each); returns one line per
// rank that failed, naming it.
std::string RunOnEveryGpu(const RankCheck& check) {
  const int size = GpuCount();
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

#define LOOM_REQUIRE_GPUS()                                                              \
  if (GpuCount() < 2) {                                                                  \
    GTEST_SKIP() << "needs two GPUs or more (one rank each): " << GpuCount() << " here"; \
  }

// The first element at which got != want, or "".
template <typename T>
std::string Mismatch(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  if (got.size() != want.size()) return std::string(what) + ": could not read the result";
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(got[i] == want[i])) {
      return std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(got[i]) +
             ", want " + std::to_string(want[i]);
    }
  }
  return "";
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
    DeviceVector<float> d(x);
    if (!d.ok()) return std::string("cudaMalloc");
    if (Status st = world.AllReduce(d.Buffer(DType::kF32)); !st.ok()) return st.ToString();
    std::string e = Mismatch(d.Host(), want, "sum");
    if (!e.empty()) return e;
    // Small integers are exact in bf16, so the sum is too.
    std::vector<uint16_t> h(64), hwant(64);
    for (size_t i = 0; i < h.size(); ++i) {
      h[i] = FloatToBf16(static_cast<float>(i % 8 + rank));
      hwant[i] = FloatToBf16(static_cast<float>(size * (i % 8) + size * (size - 1) / 2));
    }
    DeviceVector<uint16_t> b(h);
    if (Status st = world.AllReduce(b.Buffer(DType::kBF16)); !st.ok()) return st.ToString();
    return Mismatch(b.Host(), hwant, "bf16 sum");
  });
  EXPECT_EQ(errors, "");
}

TEST(NcclThreads, AllGatherReduceScatterBroadcast) {
  LOOM_REQUIRE_GPUS();
  const std::string errors = RunOnEveryGpu([](int rank, int size, Communicator& world) {
    const int per = 5;
    DeviceVector<float> in(std::vector<float>(per, static_cast<float>(rank + 1)));
    DeviceVector<float> all(std::vector<float>(per * size, -1.0f));
    if (Status st = world.AllGather(in.Buffer(DType::kF32), all.Buffer(DType::kF32)); !st.ok()) {
      return st.ToString();
    }
    std::vector<float> want(per * size);
    for (int i = 0; i < per * size; ++i) want[i] = static_cast<float>(i / per + 1);
    std::string e = Mismatch(all.Host(), want, "all-gather");
    if (!e.empty()) return e;
    // Reduce-scatter of [1, 2, ..., per * size] from every rank: rank r keeps size * its chunk.
    std::vector<float> full(per * size);
    std::iota(full.begin(), full.end(), 1.0f);
    DeviceVector<float> rs_in(full);
    DeviceVector<float> rs_out(std::vector<float>(per, 0.0f));
    if (Status st = world.ReduceScatter(rs_in.Buffer(DType::kF32), rs_out.Buffer(DType::kF32));
        !st.ok()) {
      return st.ToString();
    }
    std::vector<float> rs_want(per);
    for (int i = 0; i < per; ++i) rs_want[i] = size * full[rank * per + i];
    e = Mismatch(rs_out.Host(), rs_want, "reduce-scatter");
    if (!e.empty()) return e;
    const int root = size - 1;
    DeviceVector<float> b(std::vector<float>(7, rank == root ? 42.0f : 0.0f));
    if (Status st = world.Broadcast(b.Buffer(DType::kF32), root); !st.ok()) return st.ToString();
    e = Mismatch(b.Host(), std::vector<float>(7, 42.0f), "broadcast");
    if (!e.empty()) return e;
    const Status st = world.Barrier();
    return st.ok() ? std::string() : st.ToString();
  });
  EXPECT_EQ(errors, "");
}

TEST(NcclThreads, SendRecvRing) {
  LOOM_REQUIRE_GPUS();
  const std::string errors = RunOnEveryGpu([](int rank, int size, Communicator& world) {
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    DeviceVector<float> out(std::vector<float>(16, static_cast<float>(rank)));
    DeviceVector<float> in(std::vector<float>(16, -1.0f));
    // NCCL matches by order: even ranks send first, odd ranks receive first.
    for (int k = 0; k < 2; ++k) {
      const bool sending = (rank % 2 == 0) == (k == 0);
      const Status st = sending ? world.Send(out.Buffer(DType::kF32), next)
                                : world.Recv(in.Buffer(DType::kF32), prev);
      if (!st.ok()) return st.ToString();
    }
    return Mismatch(in.Host(), std::vector<float>(16, static_cast<float>(prev)), "received");
  });
  EXPECT_EQ(errors, "");
}

}  // namespace
}  // namespace loom
