// CUDA devices: discovery, selection per local rank and stream synchronisation. Built only when
// the CUDA toolkit is found (LOOM_CUDA=AUTO|ON); needs no CUDA header (see stream.h).
// Every function returns a Status instead of aborting.
//
// Kept for existing callers: this header also declares the kernel launchers (kernels.h).
#pragma once

#include "core/cuda/kernels.h"
#include "core/cuda/stream.h"
#include "core/status.h"

namespace loom::cuda {

// Number of usable GPUs; 0 (not an error) when the driver or devices are absent.
int DeviceCount();

// The process's rank among the processes of its node, from the first of these variables that is
// set: OMPI_COMM_WORLD_LOCAL_RANK (Open MPI's mpirun), SLURM_LOCALID (srun), LOCAL_RANK (torchrun
// and most launchers). 0 when none is set (a single process per node). InvalidArgument naming the
// variable when its value is not a non-negative integer. Reads the environment only.
Result<int> LocalRankFromEnv();

// Makes device (local_rank % DeviceCount()) current for the calling thread (cudaSetDevice) and
// returns its index, so ranks sharing a node spread over its GPUs (and wrap around when there are
// more ranks than GPUs). FailedPrecondition naming the rank and the device count when there is no
// device (or no driver); InvalidArgument for a negative rank.
Result<int> SelectDevice(int local_rank);

// Waits until all work queued on `stream` has finished; reports errors of that work (a kernel
// that faulted after its launch was checked surfaces here).
Status Synchronize(Stream stream = nullptr);

}  // namespace loom::cuda
