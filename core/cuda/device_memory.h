// Device memory for core/caching_allocator.h: the RawMemory behind a GPU rank's CachingAllocator,
// so parameters, gradients, optimizer state and activations are served (and accounted by MemTag)
// from one cache instead of a cudaMalloc/cudaFree per tensor (both synchronise the device).
//
// Needs no CUDA header. Thread-safe: every call names its device, so the calling thread's current
// device does not matter (and is left as it was).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "core/caching_allocator.h"
#include "core/status.h"

namespace loom::cuda {

class DeviceMemory : public RawMemory {
 public:
  // Memory of the calling thread's current device (cudaGetDevice). FailedPrecondition when there
  // is no device or driver.
  static Result<std::unique_ptr<DeviceMemory>> ForCurrentDevice();

  // cudaMalloc on the device. An error names the bytes asked for, the device and
  // cudaGetErrorString (out of memory included); it never aborts.
  Result<void*> Malloc(size_t bytes) override;
  // cudaFree (which waits for the device's work). An error cannot be returned through RawMemory:
  // it is cleared so that it does not surface in the next unrelated check (see the .cc).
  void Free(void* ptr, size_t bytes) override;
  const char* name() const override { return name_.c_str(); }  // "cuda device N"
  int device() const { return device_; }

 private:
  explicit DeviceMemory(int device);

  const int device_;
  const std::string name_;
};

}  // namespace loom::cuda
