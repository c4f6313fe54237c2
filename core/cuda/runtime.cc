// Streams, copies, fills and device properties over the CUDA runtime.
#include "core/cuda/runtime.h"

#include <cuda_runtime.h>

#include <utility>

#include "core/cuda/check.h"

namespace loom::cuda {

Result<OwnedStream> OwnedStream::Create() {
  OwnedStream s;
  cudaStream_t raw = nullptr;
  LOOM_RETURN_IF_ERROR(internal::Check(cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking),
                                       "cudaStreamCreateWithFlags"));
  s.stream_ = raw;
  return s;
}

OwnedStream::OwnedStream(OwnedStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)) {}

OwnedStream& OwnedStream::operator=(OwnedStream&& other) noexcept {
  std::swap(stream_, other.stream_);
  return *this;
}

OwnedStream::~OwnedStream() {
  // Errors of earlier work were reported by the owner's synchronisations; nothing to add here.
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

Status CopyToDevice(void* dst, const void* src, size_t bytes, Stream stream) {
  if (bytes == 0) return Status::Ok();
  LOOM_RETURN_IF_ERROR(internal::Check(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync H2D"));
  return internal::Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize after H2D copy");
}

Status CopyToHost(void* dst, const void* src, size_t bytes, Stream stream) {
  if (bytes == 0) return Status::Ok();
  LOOM_RETURN_IF_ERROR(internal::Check(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync D2H"));
  return internal::Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize after D2H copy");
}

Status CopyOnDevice(void* dst, const void* src, size_t bytes, Stream stream) {
  if (bytes == 0) return Status::Ok();
  return internal::Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream),
                         "cudaMemcpyAsync D2D");
}

Status FillZero(void* dst, size_t bytes, Stream stream) {
  if (bytes == 0) return Status::Ok();
  return internal::Check(cudaMemsetAsync(dst, 0, bytes, stream), "cudaMemsetAsync");
}

Result<DeviceInfo> CurrentDeviceInfo() {
  DeviceInfo info;
  LOOM_RETURN_IF_ERROR(internal::Check(cudaGetDevice(&info.index), "cudaGetDevice"));
  cudaDeviceProp prop{};
  LOOM_RETURN_IF_ERROR(
      internal::Check(cudaGetDeviceProperties(&prop, info.index), "cudaGetDeviceProperties"));
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  size_t free_bytes = 0, total_bytes = 0;
  LOOM_RETURN_IF_ERROR(
      internal::Check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  info.total_bytes = static_cast<int64_t>(total_bytes);
  info.free_bytes = static_cast<int64_t>(free_bytes);
  return info;
}

}  // namespace loom::cuda
