// MPI backend: initialisation and finalization, dtype mapping, and the transport of a group
// (an MPI communicator whose calls run on the communication thread).
#include "comm/mpi/mpi_backend.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <functional>

#include "comm/call.h"
#include "comm/mpi/mpi_engine.h"
#include "comm/reduce.h"

namespace loom {
namespace {

// MPI operations for the 16-bit float types (MPI_Op_create's signature).
template <DType kType, ReduceOp kOp>
void HalfOp(void* in, void* inout, int* len, MPI_Datatype*) {
  ReduceInto(inout, in, *len, kType, kOp);
}

struct HalfOps {
  MPI_Op bf16_sum = MPI_OP_NULL, bf16_max = MPI_OP_NULL;
  MPI_Op f16_sum = MPI_OP_NULL, f16_max = MPI_OP_NULL;
};

MPI_Datatype MpiType(DType dtype) {
  switch (dtype) {
    case DType::kI32:
      return MPI_INT32_T;
    case DType::kU8:
      return MPI_UINT8_T;
    case DType::kBF16:
    case DType::kF16:
      return MPI_UINT16_T;  // bytes moved as they are; reduced by HalfOps
    default:
      return MPI_FLOAT;  // F32 (other dtypes are refused when the call is issued)
  }
}

MPI_Op MpiReduce(DType dtype, ReduceOp op, const HalfOps& half) {
  const bool sum = op == ReduceOp::kSum;
  if (dtype == DType::kBF16) return sum ? half.bf16_sum : half.bf16_max;
  if (dtype == DType::kF16) return sum ? half.f16_sum : half.f16_max;
  return sum ? MPI_SUM : MPI_MAX;
}

class MpiGroup : public GroupTransport {
 public:
  MpiGroup(MPI_Comm comm, std::shared_ptr<MpiEngine> engine, std::shared_ptr<RankContext> ctx,
           const HalfOps* half)
      : comm_(comm), engine_(std::move(engine)), ctx_(std::move(ctx)), half_(half) {}
  // After an abandonment the abandoned call may be using this communicator: it is left to the
  // job's abort.
  ~MpiGroup() override {
    if (ctx_->Abandoned()) {
      // Neither the communicator nor the engine (whose thread may be blocked in MPI for good)
      // may go; the job is being aborted.
      (void)new std::shared_ptr<MpiEngine>(std::move(engine_));
      return;
    }
    MPI_Comm_free(&comm_);
  }

  void Submit(std::shared_ptr<CommCall> call) override {
    const CallSpec& s = call->spec();
    const bool per_rank = s.op == CommOp::kReduceScatter || s.op == CommOp::kAllGather;
    const int64_t elements = per_rank ? s.count * s.size : s.count;
    if (elements > INT_MAX) {
      call->Reject(InvalidArgument(call->what() + ": " + std::to_string(elements) +
                                   " elements exceed the MPI count limit; split the buffer"));
      return;
    }
    MpiEngine::Op op{Start(s), std::move(call), /*cancel=*/s.op == CommOp::kRecv};
    engine_->Submit(std::move(op));
  }

 private:
  std::function<int(MPI_Request*)> Start(const CallSpec& s) const {
    const MPI_Comm c = comm_;
    const MPI_Datatype t = MpiType(s.dtype);
    const MPI_Op mop = MpiReduce(s.dtype, s.reduce, *half_);
    const int n = static_cast<int>(s.count);
    const int peer = s.peer, tag = s.tag;
    const void* in = s.in;
    void* out = s.out;
    switch (s.op) {
      case CommOp::kAllReduce:
        return [=](MPI_Request* r) {
          *r = MPI_REQUEST_NULL;
          return MPI_Allreduce(MPI_IN_PLACE, out, n, t, mop, c);
        };
      case CommOp::kReduceScatter:
        return [=](MPI_Request* r) {
          *r = MPI_REQUEST_NULL;
          return MPI_Reduce_scatter_block(in, out, n, t, mop, c);
        };
      case CommOp::kAllGather: {
        // In place when `in` is this rank's chunk of `out` (ZeRO re-gathers updated parameters).
        const size_t chunk = static_cast<size_t>(s.count) * DTypeSize(s.dtype);
        const void* send =
            in == static_cast<char*>(out) + static_cast<size_t>(s.rank) * chunk ? MPI_IN_PLACE : in;
        return [=](MPI_Request* r) {
          *r = MPI_REQUEST_NULL;
          return MPI_Allgather(send, n, t, out, n, t, c);
        };
      }
      case CommOp::kBroadcast:
        return [=](MPI_Request* r) {
          *r = MPI_REQUEST_NULL;
          return MPI_Bcast(out, n, t, peer, c);
        };
      case CommOp::kSend:
        return [=](MPI_Request* r) { return MPI_Isend(in, n, t, peer, tag, c, r); };
      case CommOp::kRecv:
        return [=](MPI_Request* r) { return MPI_Irecv(out, n, t, peer, tag, c, r); };
      case CommOp::kBarrier:
        break;
    }
    return [=](MPI_Request* r) {
      *r = MPI_REQUEST_NULL;
      return MPI_Barrier(c);
    };
  }

  MPI_Comm comm_;
  std::shared_ptr<MpiEngine> engine_;
  std::shared_ptr<RankContext> ctx_;
  const HalfOps* half_;  // owned by the backend, which outlives its groups
};

class MpiBackend : public Backend {
 public:
  MpiBackend(int rank, int size, int local_size, std::chrono::milliseconds timeout)
      : Backend(rank, size, timeout), local_size_(local_size) {}

  // After an abandonment a call may still be inside MPI: finalizing then is erroneous (the
  // callers abort the job instead; this is the fallback for those that do not).
  ~MpiBackend() override {
    if (Abandoned()) {  // the engine's thread may be blocked in MPI for good: leave it and MPI be
      (void)new std::shared_ptr<MpiEngine>(std::move(engine_));
      return;
    }
    engine_.reset();  // joins the communication thread (null when Init failed before making it)
    for (MPI_Op* op : {&half_.bf16_sum, &half_.bf16_max, &half_.f16_sum, &half_.f16_max}) {
      if (*op != MPI_OP_NULL) MPI_Op_free(op);
    }
    MPI_Finalize();
  }

  Status Start() {
    const std::pair<MPI_Op*, MPI_User_function*> ops[] = {
        {&half_.bf16_sum, HalfOp<DType::kBF16, ReduceOp::kSum>},
        {&half_.bf16_max, HalfOp<DType::kBF16, ReduceOp::kMax>},
        {&half_.f16_sum, HalfOp<DType::kF16, ReduceOp::kSum>},
        {&half_.f16_max, HalfOp<DType::kF16, ReduceOp::kMax>}};
    for (const auto& [op, fn] : ops) {
      const int rc = MPI_Op_create(fn, /*commute=*/1, op);
      if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Op_create for 16-bit floats");
    }
    engine_ = std::make_shared<MpiEngine>(context());
    return Status::Ok();
  }

  BackendKind kind() const override { return BackendKind::kMpi; }
  int local_size() const override { return local_size_; }
  bool CanServe(Device device) const override { return device == Device::kCpu; }

  [[noreturn]] void Abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 protected:
  Result<std::unique_ptr<GroupTransport>> NewGroup(const std::string& name,
                                                   const std::vector<int>& members,
                                                   bool world) override {
    MPI_Comm comm;
    if (world) {
      const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
      if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_dup");
    } else {
      MPI_Group world_group, group;
      MPI_Comm_group(MPI_COMM_WORLD, &world_group);
      int rc =
          MPI_Group_incl(world_group, static_cast<int>(members.size()), members.data(), &group);
      MPI_Group_free(&world_group);
      if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Group_incl for group '" + name + "'");
      // The tag only has to separate concurrent creations among the same members.
      const int tag = static_cast<int>(std::hash<std::string>{}(name) % 30000);
      rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, tag, &comm);
      MPI_Group_free(&group);
      if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_create_group for '" + name + "'");
    }
    return std::unique_ptr<GroupTransport>(new MpiGroup(comm, engine_, context(), &half_));
  }

 private:
  const int local_size_;
  HalfOps half_;
  std::shared_ptr<MpiEngine> engine_;
};

}  // namespace

bool LaunchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_RANK") || std::getenv("PMIX_RANK");
}

Result<std::shared_ptr<Backend>> CreateMpiBackend(const BackendOptions& options) {
  // CPU ranks share cores with their compute threads: an MPI call that waits for a peer should
  // yield the core instead of spinning on it (an explicit setting in the environment wins).
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  int provided = 0;
  int rc = MPI_Init_thread(options.argc, options.argv, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Init_thread");
  if (provided < MPI_THREAD_MULTIPLE) {
    return FailedPrecondition("MPI does not provide MPI_THREAD_MULTIPLE (got level " +
                              std::to_string(provided) + ")");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1, local = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (const char* ls = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
    local = std::max(1, std::atoi(ls));
  // From here on the backend owns MPI: an error below finalizes it on the way out.
  Result<std::chrono::milliseconds> timeout = DefaultTimeout(options);
  auto backend = std::make_shared<MpiBackend>(
      rank, size, local, timeout.ok() ? *timeout : std::chrono::milliseconds(1));
  if (!timeout.ok()) return timeout.status();
  LOOM_RETURN_IF_ERROR(backend->Start());
  return std::shared_ptr<Backend>(std::move(backend));
}

}  // namespace loom
