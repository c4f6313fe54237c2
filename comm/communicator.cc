// Blocking forms of the communicator operations.
#include "comm/communicator.h"

namespace loom {

Status Communicator::AllReduce(float* data, int64_t n, ReduceOp op) {
  return AllReduceAsync(data, n, op)->Wait(DefaultDeadline());
}
Status Communicator::ReduceScatter(const float* in, float* out, int64_t n_per_rank) {
  return ReduceScatterAsync(in, out, n_per_rank)->Wait(DefaultDeadline());
}
Status Communicator::AllGather(const float* in, float* out, int64_t n_per_rank) {
  return AllGatherAsync(in, out, n_per_rank)->Wait(DefaultDeadline());
}
Status Communicator::Broadcast(float* data, int64_t n, int root) {
  return BroadcastAsync(data, n, root)->Wait(DefaultDeadline());
}
Status Communicator::Send(const float* data, int64_t n, int peer, int tag) {
  return SendAsync(data, n, peer, tag)->Wait(DefaultDeadline());
}
Status Communicator::Recv(float* data, int64_t n, int peer, int tag) {
  return RecvAsync(data, n, peer, tag)->Wait(DefaultDeadline());
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
