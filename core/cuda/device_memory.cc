// cudaMalloc/cudaFree on a fixed device, for the caching allocator.
#include "core/cuda/device_memory.h"

#include <cuda_runtime.h>

#include <string>

#include "core/cuda/check.h"

namespace loom::cuda {
namespace {

// Makes `device` current for the scope and restores the caller's device afterwards, so a
// DeviceMemory serves its own device whatever thread allocates.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      (void)cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ != device) status_ = internal::Check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceScope() {
    if (previous_ >= 0 && status_.ok()) (void)cudaSetDevice(previous_);
  }
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  Status status_;
};

}  // namespace

DeviceMemory::DeviceMemory(int device)
    : device_(device), name_("cuda device " + std::to_string(device)) {}

Result<std::unique_ptr<DeviceMemory>> DeviceMemory::ForCurrentDevice() {
  int device = -1;
  const cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return FailedPrecondition(std::string("DeviceMemory: no current CUDA device: ") +
                              cudaGetErrorString(err));
  }
  return std::unique_ptr<DeviceMemory>(new DeviceMemory(device));
}

Result<void*> DeviceMemory::Malloc(size_t bytes) {
  DeviceScope scope(device_);
  LOOM_RETURN_IF_ERROR(scope.status());
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    // cudaErrorMemoryAllocation is not sticky, but it stays as the "last error" that the next
    // CheckLaunch reads: clear it, the caller gets it here.
    (void)cudaGetLastError();
    return Internal("cudaMalloc of " + std::to_string(bytes) + " bytes on " + name_ +
                    " failed: " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")");
  }
  return p;
}

void DeviceMemory::Free(void* ptr, size_t /*bytes*/) {
  if (ptr == nullptr) return;
  DeviceScope scope(device_);
  // A failure here means the context is already broken (a sticky error from a faulted kernel);
  // that error resurfaces at the owner's next synchronisation, which is where it is reported.
  if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
}

}  // namespace loom::cuda
