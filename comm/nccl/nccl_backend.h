// NCCL backend for GPU ranks (comm/backend.h, BackendKind::kNccl): one rank per GPU, device
// buffers only (CanServe(kCuda)). Built where the CUDA toolkit and NCCL are found
// (LOOM_HAVE_NCCL); elsewhere CreateBackend(kNccl) says it is not built.
//
// Bootstrap: NCCL needs each group's unique id on every member before ncclCommInitRank. Another
// backend carries it (the "bootstrap": MPI under mpirun or Slurm, or any backend whose ranks are
// the same processes): for each group, the group's first member draws the id and broadcasts it
// over the bootstrap's group of the same members. Communicator initialisation is non-blocking
// and polled against the default deadline, so a member that never joins is an error naming the
// group, not a hang.
//
// Calls: every call of this rank runs on one communication stream, in issue order (NCCL matches
// collectives and point-to-point calls by their order on each communicator; tags are ignored, so
// peers must issue their sends and receives in matching order, as the pipeline does). A send or a
// receive issued alone is an NCCL group of its own and may hold the stream until its peer's
// matching call runs; the calls of one Communicator::ExchangeAsync are fused into one group
// (ncclGroupStart/End), so an exchange in which every rank first receives (ring attention's) makes
// progress. Its first call's trace record holds the group's time on the device; the others end with
// it. Issued one by one, such an exchange may wait until its deadline: order single calls as
// Megatron-LM does without batched calls (even ranks send first). Before launching, the
// communication stream waits for an event recorded on the compute stream when the call was issued,
// so a call sees what the compute stream wrote before it; a CommHandle's Wait returns once the
// call's end event has completed on the device. Each call's start and end in the trace
// (comm/trace.h) are CUDA events on the communication stream, converted to the trace's clock: the
// detector sees the time the GPU spent in the collective, not the time of a launch.
//
// Deadlines: a wait that passes its deadline abandons the rank (comm/call.h); the engine then
// aborts every NCCL communicator (ncclCommAbort) so that no kernel waits for a lost peer forever,
// and fails every call in flight. An NCCL error (a peer's failure: at a launch, or asynchronous
// while a call is in flight) fails that call with NCCL's message and aborts every communicator
// of the rank as well: the calls in flight fail, and later ones fail at once, naming the error.
//
// dtypes: F32, BF16, F16, I32, U8; reductions sum and max.
#pragma once

#include <memory>

#include "comm/backend.h"
#include "core/status.h"

namespace loom {

// Device of this rank: local rank (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID or LOCAL_RANK, the
// first present; 0 otherwise) modulo the number of GPUs. FailedPrecondition without any GPU.
Result<int> NcclDeviceForThisRank();

// A backend over `bootstrap` (same world: rank r of one is rank r of the other), using the
// current device (NcclDeviceForThisRank has selected it unless the caller chose another).
Result<std::shared_ptr<Backend>> CreateNcclBackendOver(std::shared_ptr<Backend> bootstrap,
                                                       const BackendOptions& options = {});

// CreateBackend(kNccl): selects this rank's device and bootstraps over a new MPI backend.
Result<std::shared_ptr<Backend>> CreateNcclBackend(const BackendOptions& options);

// The compute stream that calls of `backend` (an NCCL backend) order themselves after: a
// cudaStream_t (nullptr: the legacy default stream, the default). Calls issued later wait for
// the work queued on it before them. InvalidArgument for another kind of backend.
Status SetNcclComputeStream(Backend& backend, void* cuda_stream);

}  // namespace loom
