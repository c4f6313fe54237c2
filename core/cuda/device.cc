// Device discovery and selection, and stream synchronisation.
#include "core/cuda/device.h"

#include <cuda_runtime.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "core/cuda/check.h"

namespace loom::cuda {

int DeviceCount() {
  int count = 0;  // stays 0 when the driver is missing (cudaErrorInsufficientDriver)
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // do not leave the error for the next CheckLaunch to report
    return 0;
  }
  return count;
}

Result<int> LocalRankFromEnv() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    char* end = nullptr;
    errno = 0;
    const long rank = std::strtol(value, &end, 10);
    if (end == value || *end != '\0' || errno != 0 || rank < 0 || rank > 0x7fffffffL) {
      return InvalidArgument(std::string(name) + "='" + value +
                             "': expected a non-negative integer (the local rank)");
    }
    return static_cast<int>(rank);
  }
  return 0;
}

Result<int> SelectDevice(int local_rank) {
  if (local_rank < 0) {
    return InvalidArgument("SelectDevice: negative local rank " + std::to_string(local_rank));
  }
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    std::string why = err != cudaSuccess ? std::string(": ") + cudaGetErrorString(err) : "";
    return FailedPrecondition("no CUDA device for local rank " + std::to_string(local_rank) +
                              " (device count 0" + why + ")");
  }
  const int device = local_rank % count;
  LOOM_RETURN_IF_ERROR_CTX(internal::Check(cudaSetDevice(device), "cudaSetDevice"),
                           "local rank " + std::to_string(local_rank) + " -> device " +
                               std::to_string(device) + " of " + std::to_string(count));
  return device;
}

Status Synchronize(Stream stream) {
  return internal::Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
}

}  // namespace loom::cuda
