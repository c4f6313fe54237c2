// The CUDA runtime services a device-side model needs, without CUDA headers: an owned stream,
// copies between host and device, fills, and the current device's properties. Every function
// returns a Status (the failing call and cudaGetErrorString), never aborts.
//
// Threads: these act on the calling thread's current device (SelectDevice in device.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/cuda/stream.h"
#include "core/status.h"

namespace loom::cuda {

// A stream created on the current device and destroyed with the object (after the work queued on
// it has finished: cudaStreamDestroy lets queued work complete). Non-blocking with respect to the
// legacy default stream, so it never waits implicitly for unrelated work there. Movable.
class OwnedStream {
 public:
  static Result<OwnedStream> Create();
  OwnedStream(OwnedStream&& other) noexcept;
  OwnedStream& operator=(OwnedStream&& other) noexcept;
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  ~OwnedStream();

  Stream get() const { return stream_; }

 private:
  OwnedStream() = default;
  Stream stream_ = nullptr;
};

// Host -> device. Synchronous: returns once the bytes are on the device, so `src` may be any
// host memory (pageable included) and may be reused at once. Work queued on `stream` before it
// runs first (the copy is ordered on the stream).
Status CopyToDevice(void* dst, const void* src, size_t bytes, Stream stream);
// Device -> host. Synchronous: waits for the work queued on `stream` before it, then the copy;
// faults of that work surface here.
Status CopyToHost(void* dst, const void* src, size_t bytes, Stream stream);
// Device -> device, queued on `stream` (asynchronous).
Status CopyOnDevice(void* dst, const void* src, size_t bytes, Stream stream);
// Zero bytes, queued on `stream` (asynchronous).
Status FillZero(void* dst, size_t bytes, Stream stream);

struct DeviceInfo {
  int index = -1;
  std::string name;          // cudaDeviceProp::name, e.g. "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  int64_t total_bytes = 0;  // global memory
  int64_t free_bytes = 0;   // cudaMemGetInfo at the time of the call
};
// Properties of the calling thread's current device.
Result<DeviceInfo> CurrentDeviceInfo();

}  // namespace loom::cuda
