// The communicator front: checks and numbers every call, opens its trace record, submits it to
// the backend's transport; the blocking forms and the host-float overloads.
#include "comm/communicator.h"

#include <algorithm>
#include <cstring>

#include "comm/backend.h"
#include "comm/call.h"
#include "core/fault_point.h"

namespace loom {

bool CommSupports(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16 ||
         dtype == DType::kI32 || dtype == DType::kU8;
}

const char* DeviceName(Device device) {
  return device == Device::kCpu ? "cpu" : "cuda";
}

CommHandle::~CommHandle() {
  if (call_) call_->Release();
}
Status CommHandle::Wait(Deadline deadline) {
  return call_->Wait(deadline);
}
Status CommHandle::Wait() {
  return call_->Wait(call_->deadline());
}
bool CommHandle::Done() const {
  return call_->Done();
}

Status WaitAll(const std::vector<HandlePtr>& handles, Deadline deadline) {
  Status first;
  for (const HandlePtr& h : handles) {
    Status st = h->Wait(deadline);
    if (first.ok() && !st.ok()) first = std::move(st);
  }
  return first;
}
Status WaitAll(const std::vector<HandlePtr>& handles) {
  Status first;
  for (const HandlePtr& h : handles) {
    Status st = h->Wait();
    if (first.ok() && !st.ok()) first = std::move(st);
  }
  return first;
}

// One call as the caller described it: the spec, plus the other buffer of a reduce_scatter
// (its input) or an all_gather (its output), for the checks.
struct Communicator::Request {
  CallSpec spec;
  int64_t other_count = 0;
  DType other_dtype = DType::kF32;
  Device other_device = Device::kCpu;
  int64_t bytes = 0;  // for the trace (TraceRecord::bytes)

  Request(CommOp op, const void* in, void* out, int64_t count, DType dtype, Device device) {
    spec.op = op;
    spec.in = in;
    spec.out = out;
    spec.count = count;
    spec.dtype = dtype;
    spec.device = device;
  }
};

Communicator::Communicator(std::shared_ptr<Backend> backend, std::shared_ptr<RankContext> ctx,
                           std::unique_ptr<GroupTransport> transport, std::string name,
                           std::vector<int> members)
    : backend_(std::move(backend)),
      ctx_(std::move(ctx)),
      transport_(std::move(transport)),
      name_(std::move(name)),
      members_(std::move(members)) {
  rank_ = static_cast<int>(std::find(members_.begin(), members_.end(), ctx_->world_rank()) -
                           members_.begin());
  ctx_->trace().AddGroup(name_, members_);
}

Communicator::~Communicator() = default;

int Communicator::world_rank() const {
  return ctx_->world_rank();
}
bool Communicator::Abandoned() const {
  return ctx_->Abandoned();
}
std::chrono::milliseconds Communicator::default_timeout() const {
  return ctx_->default_timeout();
}

Status Communicator::Check(const Request& req, const CallOptions& o) const {
  const CallSpec& s = req.spec;
  if (!CommSupports(s.dtype)) {
    return InvalidArgument(std::string("dtype ") + DTypeName(s.dtype) +
                           " is not carried by communicators (F32, BF16, F16, I32, U8)");
  }
  // A barrier moves no buffer: every backend serves it, whatever device it carries.
  if (s.op != CommOp::kBarrier && !backend_->CanServe(s.device)) {
    return FailedPrecondition(std::string("the ") + BackendKindName(backend_->kind()) +
                              " backend cannot serve device " + DeviceName(s.device));
  }
  const bool two = s.op == CommOp::kReduceScatter || s.op == CommOp::kAllGather;
  if (two && (req.other_dtype != s.dtype || req.other_device != s.device)) {
    return InvalidArgument(std::string("input and output differ: ") + DTypeName(s.dtype) + " on " +
                           DeviceName(s.device) + " and " + DTypeName(req.other_dtype) + " on " +
                           DeviceName(req.other_device));
  }
  if (s.count < 0 || req.other_count < 0) return InvalidArgument("negative element count");
  if (two && req.other_count != s.count * size()) {
    return InvalidArgument(std::to_string(s.count) + " elements per rank need " +
                           std::to_string(s.count * size()) + " in the whole buffer, not " +
                           std::to_string(req.other_count) + " (a group of " +
                           std::to_string(size()) + ")");
  }
  const bool reads = two || s.op == CommOp::kSend;
  const bool writes = s.op != CommOp::kSend && s.op != CommOp::kBarrier;
  if (s.count > 0 && ((reads && s.in == nullptr) || (writes && s.out == nullptr))) {
    return InvalidArgument("null buffer of " + std::to_string(s.count) + " elements");
  }
  const bool ranked = s.op == CommOp::kSend || s.op == CommOp::kRecv || s.op == CommOp::kBroadcast;
  if (ranked && (s.peer < 0 || s.peer >= size())) {
    return InvalidArgument("peer/root " + std::to_string(s.peer) + " is not a rank of the group");
  }
  if ((s.op == CommOp::kSend || s.op == CommOp::kRecv) && o.tag < 0) {
    return InvalidArgument("tag " + std::to_string(o.tag) + " is negative");
  }
  return Status::Ok();
}

std::shared_ptr<CommCall> Communicator::Prepare(const Request& req, const CallOptions& o,
                                                Status* refused) {
  CallSpec spec = req.spec;
  spec.rank = rank_;
  spec.size = size();
  const bool p2p = spec.op == CommOp::kSend || spec.op == CommOp::kRecv;
  spec.tag = p2p ? o.tag : -1;
  TraceRecord rec;
  rec.op = spec.op;
  rec.group = name_;
  rec.group_root = members_.empty() ? -1 : members_.front();
  rec.seq = next_seq_++;
  rec.bytes = req.bytes;
  rec.dtype = spec.dtype;
  rec.peer = spec.peer >= 0 && spec.peer < size() ? members_[spec.peer] : -1;
  rec.tag = spec.tag;
  rec.enqueue_ns = NowNs();
  std::string what = std::string(CommOpName(spec.op)) + " #" + std::to_string(rec.seq) +
                     " on group '" + name_ + "' " + FormatMembers(members_);
  const Deadline deadline = o.deadline ? *o.deadline : Clock::now() + ctx_->default_timeout();
  *refused = Check(req, o);
  return std::make_shared<CommCall>(ctx_, spec, std::move(rec), std::move(what), deadline);
}

HandlePtr Communicator::Issue(const Request& req, const CallOptions& o) {
  FaultPoint({FaultSite::kCommIssue, ctx_->world_rank()});  // fault/inject.h: a slow rank
  Status refused;
  std::shared_ptr<CommCall> call = Prepare(req, o, &refused);
  if (!refused.ok()) {
    call->Reject(refused.WithContext(call->what()));
  } else {
    transport_->Submit(call);
  }
  return std::make_shared<CommHandle>(std::move(call));
}

HandlePtr Communicator::AllReduceAsync(CommBuffer data, ReduceOp op, const CallOptions& o) {
  Request r(CommOp::kAllReduce, data.data, data.data, data.count, data.dtype, data.device);
  r.spec.reduce = op;
  r.bytes = data.bytes();
  return Issue(r, o);
}

HandlePtr Communicator::ReduceScatterAsync(ConstCommBuffer in, CommBuffer out, ReduceOp op,
                                           const CallOptions& o) {
  Request r(CommOp::kReduceScatter, in.data, out.data, out.count, out.dtype, out.device);
  r.spec.reduce = op;
  r.other_count = in.count;
  r.other_dtype = in.dtype;
  r.other_device = in.device;
  r.bytes = in.bytes();
  return Issue(r, o);
}

HandlePtr Communicator::AllGatherAsync(ConstCommBuffer in, CommBuffer out, const CallOptions& o) {
  Request r(CommOp::kAllGather, in.data, out.data, in.count, in.dtype, in.device);
  r.other_count = out.count;
  r.other_dtype = out.dtype;
  r.other_device = out.device;
  r.bytes = out.bytes();
  return Issue(r, o);
}

HandlePtr Communicator::BroadcastAsync(CommBuffer data, int root, const CallOptions& o) {
  Request r(CommOp::kBroadcast, data.data, data.data, data.count, data.dtype, data.device);
  r.spec.peer = root;
  r.bytes = data.bytes();
  return Issue(r, o);
}

HandlePtr Communicator::SendAsync(ConstCommBuffer data, int peer, const CallOptions& o) {
  Request r(CommOp::kSend, data.data, nullptr, data.count, data.dtype, data.device);
  r.spec.peer = peer;
  r.bytes = data.bytes();
  return Issue(r, o);
}

HandlePtr Communicator::RecvAsync(CommBuffer data, int peer, const CallOptions& o) {
  Request r(CommOp::kRecv, nullptr, data.data, data.count, data.dtype, data.device);
  r.spec.peer = peer;
  r.bytes = data.bytes();
  return Issue(r, o);
}

HandlePtr Communicator::BarrierAsync(const CallOptions& o) {
  Request r(CommOp::kBarrier, nullptr, nullptr, 0, DType::kF32, Device::kCpu);
  return Issue(r, o);
}

std::vector<HandlePtr> Communicator::ExchangeAsync(const std::vector<P2PCall>& calls,
                                                   const CallOptions& o) {
  FaultPoint({FaultSite::kCommIssue, ctx_->world_rank()});  // fault/inject.h: a slow rank
  std::vector<std::shared_ptr<CommCall>> prepared;
  std::vector<Status> refused(calls.size());
  int first_refused = -1;
  for (size_t i = 0; i < calls.size(); ++i) {
    const P2PCall& c = calls[i];
    Request r(c.op, c.in, c.out, c.count, c.dtype, c.device);
    r.spec.peer = c.peer;
    r.bytes = r.spec.count * static_cast<int64_t>(DTypeSize(c.dtype));
    CallOptions co = o;
    co.tag = c.tag;
    prepared.push_back(Prepare(r, co, &refused[i]));
    if (refused[i].ok() && c.op != CommOp::kSend && c.op != CommOp::kRecv) {
      refused[i] = InvalidArgument("an exchange takes sends and receives only");
    }
    if (!refused[i].ok() && first_refused < 0) first_refused = static_cast<int>(i);
  }
  if (first_refused >= 0) {
    const size_t k = static_cast<size_t>(first_refused);
    const std::string why =
        prepared[k]->what() + ", of the same exchange, was refused: " + refused[k].message();
    for (size_t i = 0; i < prepared.size(); ++i) {
      prepared[i]->Reject(refused[i].ok()
                              ? FailedPrecondition(prepared[i]->what() + " was not started: " + why)
                              : refused[i].WithContext(prepared[i]->what()));
    }
  } else if (!prepared.empty()) {
    transport_->SubmitBatch(prepared);
  }
  std::vector<HandlePtr> handles;
  handles.reserve(prepared.size());
  for (auto& call : prepared) handles.push_back(std::make_shared<CommHandle>(std::move(call)));
  return handles;
}

std::string FormatMembers(const std::vector<int>& members) {
  std::string s = "[";
  for (size_t i = 0; i < members.size(); ++i) s += (i ? ", " : "") + std::to_string(members[i]);
  return s + "]";
}

}  // namespace loom
