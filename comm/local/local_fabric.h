// The in-memory world of the local backend (local_backend.h): where ranks' threads sleep, how
// group members meet for a collective, and the mailboxes of point-to-point messages.
// Thread-safe; internal to comm/local/.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "comm/call.h"
#include "core/status.h"

namespace loom {

// Where a rank's communication thread sleeps; woken by new calls, arriving messages, a completed
// collective and shutdown. The thread's queue is guarded by `mu` too (local_backend.cc).
struct LocalInbox {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t epoch = 0;  // GUARDED_BY(mu): bumped by every wake-up
  bool stop = false;   // GUARDED_BY(mu)

  void Wake();
};

// One collective of a group: what the first member to arrive called, and every member's
// contribution, copied on arrival.
struct LocalSlot {
  CommOp op = CommOp::kBarrier;
  DType dtype = DType::kF32;
  int64_t count = 0;
  ReduceOp reduce = ReduceOp::kSum;
  int root = -1;
  int first = -1;                               // the group rank that arrived first
  std::vector<std::vector<std::byte>> contrib;  // by group rank
  int arrived = 0, consumed = 0;
  Status error;                       // members disagree on the call
  std::atomic<bool> complete{false};  // every member arrived: contrib is read-only from then on
};

// One group, shared by its members' transports.
class LocalGroup {
 public:
  LocalGroup(std::string name, std::vector<int> members,
             std::vector<std::shared_ptr<LocalInbox>> inboxes);

  // Member `spec.rank`'s thread at its collective number `index` of this group (members count
  // their collectives alike): deposits its contribution; the last to arrive completes the slot
  // and wakes every member.
  std::shared_ptr<LocalSlot> Arrive(uint64_t index, const CallSpec& spec);
  // After the slot completed: this member's result into its own buffers.
  Status Finish(uint64_t index, const std::shared_ptr<LocalSlot>& slot, const CallSpec& spec);
  // The index of member `rank`'s next collective (only its own thread asks).
  uint64_t NextIndex(int rank) { return next_index_[static_cast<size_t>(rank)]++; }

  // A buffered message from group rank `src` to `dst` (copied; `dst` is woken).
  void Post(int src, int dst, int tag, const void* data, int64_t bytes);
  // The oldest message from `src` to `dst` with `tag`, if any.
  bool Take(int src, int dst, int tag, std::vector<std::byte>* msg);

 private:
  Status Disagree(const LocalSlot& slot, const CallSpec& spec, uint64_t index) const;

  const std::string name_;
  const std::vector<int> members_;
  const std::vector<std::shared_ptr<LocalInbox>> inboxes_;  // by group rank
  std::vector<uint64_t> next_index_;                        // by group rank, its thread only
  std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<LocalSlot>> slots_;                          // GUARDED_BY(mu_)
  std::map<std::tuple<int, int, int>, std::deque<std::vector<std::byte>>> mail_;  // GUARDED_BY(mu_)
};

// The world: the ranks' inboxes and the groups being created.
class LocalFabric {
 public:
  explicit LocalFabric(int size);
  int size() const { return static_cast<int>(inboxes_.size()); }
  const std::shared_ptr<LocalInbox>& inbox(int world_rank) const {
    return inboxes_[static_cast<size_t>(world_rank)];
  }
  // The group that world rank `rank`'s next creation of (name, members) meets its other members
  // at: members create their groups in the same order, so the k-th creation of a group by one
  // member is the k-th by every other.
  std::shared_ptr<LocalGroup> Join(int rank, const std::string& name,
                                   const std::vector<int>& members);

 private:
  using Key = std::pair<std::string, std::vector<int>>;
  struct Pending {
    std::shared_ptr<LocalGroup> group;
    size_t joined = 0;
  };
  const std::vector<std::shared_ptr<LocalInbox>> inboxes_;
  std::mutex mu_;
  std::map<std::pair<Key, int>, uint64_t> created_;      // GUARDED_BY(mu_): (key, rank) -> k
  std::map<std::pair<Key, uint64_t>, Pending> pending_;  // GUARDED_BY(mu_): until all joined
};

}  // namespace loom
