// Blobs gathered from every member, and statuses agreed by all.
#include "comm/agree.h"

#include <algorithm>
#include <cstdint>
#include <memory>

namespace loom {

Result<std::vector<std::string>> AllGatherBlobs(Communicator* comm, const std::string& mine,
                                                Deadline deadline) {
  if (comm == nullptr) return std::vector<std::string>{mine};
  const int n = comm->size();
  KeepIfAbandoned keep(comm);
  std::vector<int32_t> lens(static_cast<size_t>(n) + 1);
  keep(lens);
  lens[n] = static_cast<int32_t>(mine.size());  // this member's, staged with the others
  LOOM_RETURN_IF_ERROR(comm->AllGather(ConstCommBuffer::Host(&lens[n], 1),
                                       CommBuffer::Host(lens.data(), n), {deadline}));
  const int32_t width = std::max<int32_t>(1, *std::max_element(lens.begin(), lens.begin() + n));
  std::string padded = mine;
  padded.resize(static_cast<size_t>(width));
  std::string all(static_cast<size_t>(width) * n, '\0');
  keep(padded);
  keep(all);
  LOOM_RETURN_IF_ERROR(comm->AllGather(
      ConstCommBuffer::Host(reinterpret_cast<const uint8_t*>(padded.data()), width),
      CommBuffer::Host(reinterpret_cast<uint8_t*>(all.data()), int64_t{width} * n), {deadline}));
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) out.push_back(all.substr(static_cast<size_t>(r) * width, lens[r]));
  return out;
}

Status AgreeStatus(Communicator* comm, const Status& local, const std::string& what,
                   Deadline deadline, StatusCode code) {
  if (comm == nullptr) return local;
  // The lowest failing member: the maximum of (n - rank) over failing members.
  int32_t failed = local.ok() ? 0 : comm->size() - comm->rank();
  LOOM_RETURN_IF_ERROR(comm->AllReduce(CommBuffer::Host(&failed, 1), ReduceOp::kMax, {deadline}));
  if (!local.ok()) return local;
  if (failed == 0) return Status::Ok();
  const int rank = comm->members()[static_cast<size_t>(comm->size() - failed)];
  return Status(code, what + " failed on rank " + std::to_string(rank) + " (see its error)");
}

}  // namespace loom
