// Blocking forms of the communicator operations, and the host-float overloads.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace loom {
namespace {

// Small buffers of the blocking forms are often the caller's stack variables. The operation runs
// on a heap copy, which a timed-out operation keeps for good: it may still write there when the
// late member arrives, long after the caller's frame is gone (see Communicator::Abandoned); any
// failure keeps it, since a cancelled receive may have been matched already.
// in_bytes of `in` are copied in; on success out_bytes are copied back to `out`, from the
// input's place when `in_place`, else from a separate output area.
template <class Issue>
Status Staged(const void* in, int64_t in_bytes, void* out, int64_t out_bytes, bool in_place,
              Issue issue) {
  const size_t total = static_cast<size_t>(in_bytes + (in_place ? 0 : out_bytes));
  auto stage = std::make_unique<std::vector<std::byte>>(std::max<size_t>(total, 1));
  std::byte* s_in = stage->data();
  std::byte* s_out = in_place ? s_in : s_in + in_bytes;
  if (in_bytes > 0) std::memcpy(s_in, in, static_cast<size_t>(in_bytes));
  Status st = issue(s_in, s_out)->Wait();
  if (!st.ok()) {
    (void)stage.release();  // perhaps still an abandoned operation's buffer: a few bytes, kept
    return st;
  }
  if (out_bytes > 0) std::memcpy(out, s_out, static_cast<size_t>(out_bytes));
  return st;
}

CommBuffer With(const CommBuffer& b, void* data) {
  CommBuffer c = b;
  c.data = data;
  return c;
}
ConstCommBuffer With(const ConstCommBuffer& b, const void* data) {
  ConstCommBuffer c = b;
  c.data = data;
  return c;
}

// Staging copies host memory: a device buffer (refused by the call's checks when the backend
// cannot serve it) is passed through.
bool Small(int64_t bytes, Device device) {
  return bytes <= Communicator::kStagedBytes && device == Device::kCpu;
}

}  // namespace

Status Communicator::AllReduce(CommBuffer data, ReduceOp op, const CallOptions& o) {
  if (!Small(data.bytes(), data.device)) return AllReduceAsync(data, op, o)->Wait();
  return Staged(data.data, data.bytes(), data.data, data.bytes(), /*in_place=*/true,
                [&](void* s, void*) { return AllReduceAsync(With(data, s), op, o); });
}
Status Communicator::ReduceScatter(ConstCommBuffer in, CommBuffer out, ReduceOp op,
                                   const CallOptions& o) {
  if (!Small(in.bytes(), in.device)) return ReduceScatterAsync(in, out, op, o)->Wait();
  return Staged(in.data, in.bytes(), out.data, out.bytes(), /*in_place=*/false,
                [&](void* s_in, void* s_out) {
                  return ReduceScatterAsync(With(in, s_in), With(out, s_out), op, o);
                });
}
Status Communicator::AllGather(ConstCommBuffer in, CommBuffer out, const CallOptions& o) {
  if (!Small(out.bytes(), out.device)) return AllGatherAsync(in, out, o)->Wait();
  return Staged(
      in.data, in.bytes(), out.data, out.bytes(), /*in_place=*/false,
      [&](void* s_in, void* s_out) { return AllGatherAsync(With(in, s_in), With(out, s_out), o); });
}
Status Communicator::Broadcast(CommBuffer data, int root, const CallOptions& o) {
  if (!Small(data.bytes(), data.device)) return BroadcastAsync(data, root, o)->Wait();
  return Staged(data.data, data.bytes(), data.data, data.bytes(), /*in_place=*/true,
                [&](void* s, void*) { return BroadcastAsync(With(data, s), root, o); });
}
Status Communicator::Send(ConstCommBuffer data, int peer, const CallOptions& o) {
  // A send only reads its buffer: after a timeout it may send stale bytes, nothing worse.
  return SendAsync(data, peer, o)->Wait();
}
Status Communicator::Recv(CommBuffer data, int peer, const CallOptions& o) {
  if (!Small(data.bytes(), data.device)) return RecvAsync(data, peer, o)->Wait();
  return Staged(nullptr, 0, data.data, data.bytes(), /*in_place=*/false,
                [&](void*, void* s) { return RecvAsync(With(data, s), peer, o); });
}
Status Communicator::Barrier(const CallOptions& o) {
  return BarrierAsync(o)->Wait();
}

HandlePtr Communicator::AllReduceAsync(float* data, int64_t n, ReduceOp op) {
  return AllReduceAsync(CommBuffer::Host(data, n), op);
}
HandlePtr Communicator::ReduceScatterAsync(const float* in, float* out, int64_t n_per_rank) {
  return ReduceScatterAsync(ConstCommBuffer::Host(in, n_per_rank * size()),
                            CommBuffer::Host(out, n_per_rank));
}
HandlePtr Communicator::AllGatherAsync(const float* in, float* out, int64_t n_per_rank) {
  return AllGatherAsync(ConstCommBuffer::Host(in, n_per_rank),
                        CommBuffer::Host(out, n_per_rank * size()));
}
HandlePtr Communicator::BroadcastAsync(float* data, int64_t n, int root) {
  return BroadcastAsync(CommBuffer::Host(data, n), root);
}
HandlePtr Communicator::SendAsync(const float* data, int64_t n, int peer, int tag) {
  return SendAsync(ConstCommBuffer::Host(data, n), peer, {.tag = tag});
}
HandlePtr Communicator::RecvAsync(float* data, int64_t n, int peer, int tag) {
  return RecvAsync(CommBuffer::Host(data, n), peer, {.tag = tag});
}
Status Communicator::AllReduce(float* data, int64_t n, ReduceOp op) {
  return AllReduce(CommBuffer::Host(data, n), op);
}
Status Communicator::ReduceScatter(const float* in, float* out, int64_t n_per_rank) {
  return ReduceScatter(ConstCommBuffer::Host(in, n_per_rank * size()),
                       CommBuffer::Host(out, n_per_rank));
}
Status Communicator::AllGather(const float* in, float* out, int64_t n_per_rank) {
  return AllGather(ConstCommBuffer::Host(in, n_per_rank),
                   CommBuffer::Host(out, n_per_rank * size()));
}
Status Communicator::Broadcast(float* data, int64_t n, int root) {
  return Broadcast(CommBuffer::Host(data, n), root);
}
Status Communicator::Send(const float* data, int64_t n, int peer, int tag) {
  return Send(ConstCommBuffer::Host(data, n), peer, {.tag = tag});
}
Status Communicator::Recv(float* data, int64_t n, int peer, int tag) {
  return Recv(CommBuffer::Host(data, n), peer, {.tag = tag});
}

}  // namespace loom
