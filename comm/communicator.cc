// Blocking forms of the communicator operations.
#include "comm/communicator.h"

#include <algorithm>

namespace loom {

namespace {

// Small buffers of the blocking forms are often the caller's stack variables. The operation runs
// on a heap copy, which a timed-out operation keeps for good: it may still write there when the
// late member arrives, long after the caller's frame is gone (see Communicator::Abandoned); any
// failure keeps it, since a cancelled receive may have been matched already.
// n_in floats of `in` are copied in; on success n_out floats are copied back to `out`, from the
// input's place when `in_place`, else from a separate output area.
template <class Issue>
Status Staged(const float* in, int64_t n_in, float* out, int64_t n_out, bool in_place,
              Deadline deadline, Issue issue) {
  auto stage =
      std::make_unique<std::vector<float>>(static_cast<size_t>(n_in + (in_place ? 0 : n_out)));
  float* s_in = stage->data();
  float* s_out = in_place ? s_in : s_in + n_in;
  if (n_in > 0) std::copy(in, in + n_in, s_in);
  Status st = issue(s_in, s_out)->Wait(deadline);
  if (!st.ok()) {
    (void)stage.release();  // perhaps still an abandoned operation's buffer: a few bytes, kept
    return st;
  }
  if (n_out > 0) std::copy(s_out, s_out + n_out, out);
  return st;
}

}  // namespace

Status Communicator::AllReduce(float* data, int64_t n, ReduceOp op) {
  if (n > kStagedFloats) return AllReduceAsync(data, n, op)->Wait(DefaultDeadline());
  return Staged(data, n, data, n, /*in_place=*/true, DefaultDeadline(),
                [&](float* s, float*) { return AllReduceAsync(s, n, op); });
}
Status Communicator::ReduceScatter(const float* in, float* out, int64_t n_per_rank) {
  const int64_t n_in = n_per_rank * size();
  if (n_in > kStagedFloats) return ReduceScatterAsync(in, out, n_per_rank)->Wait(DefaultDeadline());
  return Staged(
      in, n_in, out, n_per_rank, /*in_place=*/false, DefaultDeadline(),
      [&](float* s_in, float* s_out) { return ReduceScatterAsync(s_in, s_out, n_per_rank); });
}
Status Communicator::AllGather(const float* in, float* out, int64_t n_per_rank) {
  const int64_t n_out = n_per_rank * size();
  if (n_out > kStagedFloats) return AllGatherAsync(in, out, n_per_rank)->Wait(DefaultDeadline());
  return Staged(in, n_per_rank, out, n_out, /*in_place=*/false, DefaultDeadline(),
                [&](float* s_in, float* s_out) { return AllGatherAsync(s_in, s_out, n_per_rank); });
}
Status Communicator::Broadcast(float* data, int64_t n, int root) {
  if (n > kStagedFloats) return BroadcastAsync(data, n, root)->Wait(DefaultDeadline());
  return Staged(data, n, data, n, /*in_place=*/true, DefaultDeadline(),
                [&](float* s, float*) { return BroadcastAsync(s, n, root); });
}
Status Communicator::Send(const float* data, int64_t n, int peer, int tag) {
  // A send only reads its buffer: after a timeout it may send stale bytes, nothing worse.
  return SendAsync(data, n, peer, tag)->Wait(DefaultDeadline());
}
Status Communicator::Recv(float* data, int64_t n, int peer, int tag) {
  if (n > kStagedFloats) return RecvAsync(data, n, peer, tag)->Wait(DefaultDeadline());
  return Staged(nullptr, 0, data, n, /*in_place=*/false, DefaultDeadline(),
                [&](float*, float* s) { return RecvAsync(s, n, peer, tag); });
}
Status Communicator::Barrier() {
  return BarrierAsync()->Wait(DefaultDeadline());
}

std::string FormatMembers(const std::vector<int>& members) {
  std::string s = "[";
  for (size_t i = 0; i < members.size(); ++i) s += (i ? ", " : "") + std::to_string(members[i]);
  return s + "]";
}

}  // namespace loom
