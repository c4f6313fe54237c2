// The local backend's in-memory world: collectives meet in slots, messages wait in mailboxes.
#include "comm/local/local_fabric.h"

#include <cstring>
#include <utility>

#include "comm/reduce.h"

namespace loom {
namespace {

size_t Bytes(int64_t count, DType dtype) {
  return static_cast<size_t>(count) * DTypeSize(dtype);
}

// What member `spec.rank` contributes to a collective (copied: its buffer may go before the
// others arrive, after an abandonment).
std::vector<std::byte> Contribution(const CallSpec& spec) {
  const std::byte* src = nullptr;
  size_t n = 0;
  switch (spec.op) {
    case CommOp::kAllReduce:
      src = static_cast<const std::byte*>(spec.in), n = Bytes(spec.count, spec.dtype);
      break;
    case CommOp::kReduceScatter:
      src = static_cast<const std::byte*>(spec.in), n = Bytes(spec.count * spec.size, spec.dtype);
      break;
    case CommOp::kAllGather:
      src = static_cast<const std::byte*>(spec.in), n = Bytes(spec.count, spec.dtype);
      break;
    case CommOp::kBroadcast:
      if (spec.rank == spec.peer) src = static_cast<const std::byte*>(spec.in);
      n = src ? Bytes(spec.count, spec.dtype) : 0;
      break;
    default:
      break;
  }
  return n ? std::vector<std::byte>(src, src + n) : std::vector<std::byte>();
}

}  // namespace

void LocalInbox::Wake() {
  std::lock_guard<std::mutex> lock(mu);
  ++epoch;
  cv.notify_all();
}

LocalGroup::LocalGroup(std::string name, std::vector<int> members,
                       std::vector<std::shared_ptr<LocalInbox>> inboxes)
    : name_(std::move(name)),
      members_(std::move(members)),
      inboxes_(std::move(inboxes)),
      next_index_(members_.size(), 0) {}

Status LocalGroup::Disagree(const LocalSlot& slot, const CallSpec& spec, uint64_t index) const {
  auto describe = [](CommOp op, int64_t count, DType dtype, int root) {
    std::string s =
        std::string(CommOpName(op)) + " of " + std::to_string(count) + " " + DTypeName(dtype);
    return root >= 0 ? s + " from root " + std::to_string(root) : s;
  };
  return InvalidArgument(
      "members of group '" + name_ + "' " + FormatMembers(members_) + " disagree on collective " +
      std::to_string(index) + ": world rank " + std::to_string(members_[slot.first]) + " called " +
      describe(slot.op, slot.count, slot.dtype, slot.root) + ", world rank " +
      std::to_string(members_[spec.rank]) + " " +
      describe(spec.op, spec.count, spec.dtype, spec.op == CommOp::kBroadcast ? spec.peer : -1));
}

std::shared_ptr<LocalSlot> LocalGroup::Arrive(uint64_t index, const CallSpec& spec) {
  std::vector<std::byte> mine = Contribution(spec);
  std::shared_ptr<LocalSlot> slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<LocalSlot>& s = slots_[index];
    if (!s) {
      s = std::make_shared<LocalSlot>();
      s->op = spec.op;
      s->dtype = spec.dtype;
      s->count = spec.count;
      s->reduce = spec.reduce;
      s->root = spec.op == CommOp::kBroadcast ? spec.peer : -1;
      s->first = spec.rank;
      s->contrib.resize(members_.size());
    } else if (s->op != spec.op || s->dtype != spec.dtype || s->count != spec.count ||
               s->reduce != spec.reduce ||
               s->root != (spec.op == CommOp::kBroadcast ? spec.peer : -1)) {
      if (s->error.ok()) s->error = Disagree(*s, spec, index);
    }
    s->contrib[static_cast<size_t>(spec.rank)] = std::move(mine);
    slot = s;
    if (++slot->arrived < static_cast<int>(members_.size())) return slot;
    slot->complete.store(true);
  }
  for (const auto& inbox : inboxes_) inbox->Wake();
  return slot;
}

Status LocalGroup::Finish(uint64_t index, const std::shared_ptr<LocalSlot>& slot,
                          const CallSpec& spec) {
  if (slot->error.ok()) {
    const size_t chunk = Bytes(spec.count, spec.dtype);
    const auto& c = slot->contrib;
    std::byte* out = static_cast<std::byte*>(spec.out);
    switch (spec.op) {
      case CommOp::kAllReduce:
      case CommOp::kReduceScatter: {
        // Chunk rank() of every member's input, combined in group rank order.
        const size_t at =
            spec.op == CommOp::kAllReduce ? 0 : chunk * static_cast<size_t>(spec.rank);
        if (chunk > 0) std::memcpy(out, c[0].data() + at, chunk);
        for (size_t r = 1; r < c.size(); ++r) {
          ReduceInto(out, c[r].data() + at, spec.count, spec.dtype, spec.reduce);
        }
        break;
      }
      case CommOp::kAllGather:
        for (size_t r = 0; r < c.size(); ++r) {
          if (chunk > 0) std::memcpy(out + r * chunk, c[r].data(), chunk);
        }
        break;
      case CommOp::kBroadcast:
        if (spec.rank != spec.peer && chunk > 0) {
          std::memcpy(out, c[static_cast<size_t>(spec.peer)].data(), chunk);
        }
        break;
      default:
        break;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (++slot->consumed == static_cast<int>(members_.size())) slots_.erase(index);
  return slot->error;
}

void LocalGroup::Post(int src, int dst, int tag, const void* data, int64_t bytes) {
  {
    const std::byte* p = static_cast<const std::byte*>(data);
    std::vector<std::byte> msg(p, p + bytes);
    std::lock_guard<std::mutex> lock(mu_);
    mail_[{src, dst, tag}].push_back(std::move(msg));
  }
  inboxes_[static_cast<size_t>(dst)]->Wake();
}

bool LocalGroup::Take(int src, int dst, int tag, std::vector<std::byte>* msg) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = mail_.find({src, dst, tag});
  if (it == mail_.end() || it->second.empty()) return false;
  *msg = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) mail_.erase(it);
  return true;
}

LocalFabric::LocalFabric(int size)
    : inboxes_([size] {
        std::vector<std::shared_ptr<LocalInbox>> v;
        for (int r = 0; r < size; ++r) v.push_back(std::make_shared<LocalInbox>());
        return v;
      }()) {}

std::shared_ptr<LocalGroup> LocalFabric::Join(int rank, const std::string& name,
                                              const std::vector<int>& members) {
  std::lock_guard<std::mutex> lock(mu_);
  Key key{name, members};
  const uint64_t k = created_[{key, rank}]++;
  Pending& p = pending_[{key, k}];
  if (!p.group) {
    std::vector<std::shared_ptr<LocalInbox>> inboxes;
    for (int m : members) inboxes.push_back(inbox(m));
    p.group = std::make_shared<LocalGroup>(name, members, std::move(inboxes));
  }
  std::shared_ptr<LocalGroup> group = p.group;
  if (++p.joined == members.size()) pending_.erase({key, k});
  return group;
}

}  // namespace loom
