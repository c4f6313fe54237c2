// What the NCCL backend's tests under mpirun share: the GPU count, and ranks sharing GPUs.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

namespace loom::testing {

// The GPUs of this machine; 0 without one (or without a driver).
inline int NcclTestGpuCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

// Where `ranks` outnumber `gpus` (the GPU machines lent to this project have one), ranks share a
// GPU. NCCL refuses two ranks of one communicator on one device of one host ("Duplicate GPU
// detected"), so each rank names a host of its own (NCCL_HOSTID) and NCCL connects them as nodes,
// through its socket transport over the loopback interface (unless NCCL_NET or
// NCCL_SOCKET_IFNAME say otherwise: without NCCL_NET, a machine with InfiniBand or a network
// plugin would carry them there). Call before any NCCL call: NCCL reads the host id once per
// process. Returns whether the ranks share GPUs; false also when the environment could not be set.
inline bool ShareGpusAsNodes(int rank, int ranks, int gpus) {
  if (gpus <= 0 || ranks <= gpus) return false;
  const std::string host = "loom-test-rank-" + std::to_string(rank);
  return setenv("NCCL_HOSTID", host.c_str(), 1) == 0 && setenv("NCCL_NET", "Socket", 0) == 0 &&
         setenv("NCCL_SOCKET_IFNAME", "lo", 0) == 0;
}

}  // namespace loom::testing
