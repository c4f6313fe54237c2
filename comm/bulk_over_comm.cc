// Bulk transfers over a group's communicator: the fallback transport (comm/bulk_transport.h).
// Each send is a message received straight into the peer's window, followed by its note; tags
// separate rounds in flight.
#include <algorithm>
#include <cstring>

#include "comm/bulk_transport.h"

namespace loom {
namespace {

// Messages of one round use tags 2 * (round mod kRoundsInFlight) (data) and + 1 (note): the
// transport's communicator carries nothing else point to point (bulk_transport.h), and these
// stay far below the least tag bound MPI guarantees (32767).
int DataTag(uint64_t round) {
  return 2 * static_cast<int>(round % kRoundsInFlight);
}

// Messages of at most this many bytes (MPI counts are ints), matched in order.
constexpr uint64_t kPart = uint64_t{1} << 30;

struct NoteBuf {
  uint64_t bytes = 0;
  char data[kMaxNoteBytes];
};

class BulkOverComm : public BulkTransport {
 public:
  BulkOverComm(Communicator* group, std::vector<BulkWindow> windows)
      : group_(group), windows_(std::move(windows)) {}
  ~BulkOverComm() override {
    KeepIfAbandoned keep(group_);
    for (auto& v : out_) keep(v);
    for (auto& v : in_) keep(v);
  }
  const char* name() const override { return "comm"; }

  Status Exchange(uint64_t round, const std::vector<BulkSend>& sends, std::vector<BulkRecv>* recvs,
                  Deadline deadline) override {
    CallOptions data{deadline, DataTag(round)}, note{deadline, DataTag(round) + 1};
    for (const BulkRecv& r : *recvs) LOOM_RETURN_IF_ERROR(CheckWindow(r.window, r.offset, r.bytes));
    for (const BulkSend& s : sends) {
      if (s.note.size() > kMaxNoteBytes) return InvalidArgument("bulk send: note too long");
    }
    // The notes' buffers outlive a transfer that a deadline leaves running: one set per round
    // slot, kept for good once the communicator is abandoned.
    std::vector<NoteBuf>& out = out_[round % kRoundsInFlight];
    std::vector<NoteBuf>& in = in_[round % kRoundsInFlight];
    out.assign(sends.size(), NoteBuf{});
    in.assign(recvs->size(), NoteBuf{});
    std::vector<HandlePtr> handles;
    std::vector<std::string> what;  // per handle, for the error
    for (size_t i = 0; i < recvs->size(); ++i) {
      BulkRecv& r = (*recvs)[i];
      uint8_t* dst = reinterpret_cast<uint8_t*>(windows_[r.window].base + r.offset);
      for (uint64_t at = 0; at < r.bytes || at == 0; at += kPart) {  // parts of an MPI count
        const uint64_t n = std::min(kPart, r.bytes - at);
        handles.push_back(
            group_->RecvAsync(CommBuffer::Host(dst + at, static_cast<int64_t>(n)), r.peer, data));
        what.push_back("fragment from " + Peer(r.peer));
        if (r.bytes == 0) break;
      }
      handles.push_back(group_->RecvAsync(
          CommBuffer::Host(reinterpret_cast<uint8_t*>(&in[i]), sizeof(NoteBuf)), r.peer, note));
      what.push_back("note from " + Peer(r.peer));
    }
    for (size_t i = 0; i < sends.size(); ++i) {
      const BulkSend& s = sends[i];
      out[i].bytes = s.note.size();
      std::memcpy(out[i].data, s.note.data(), s.note.size());
      const uint8_t* src = reinterpret_cast<const uint8_t*>(s.src);
      for (uint64_t at = 0; at < s.bytes || at == 0; at += kPart) {
        const uint64_t n = std::min(kPart, s.bytes - at);
        handles.push_back(group_->SendAsync(
            ConstCommBuffer::Host(src + at, static_cast<int64_t>(n)), s.peer, data));
        what.push_back("fragment to " + Peer(s.peer));
        if (s.bytes == 0) break;
      }
      handles.push_back(group_->SendAsync(
          ConstCommBuffer::Host(reinterpret_cast<const uint8_t*>(&out[i]), sizeof(NoteBuf)), s.peer,
          note));
      what.push_back("note to " + Peer(s.peer));
    }
    for (size_t h = 0; h < handles.size(); ++h) {
      Status st = handles[h]->Wait(deadline);
      if (!st.ok())
        return st.WithContext("snapshot transfer round " + std::to_string(round) + ": " + what[h]);
    }
    for (size_t i = 0; i < recvs->size(); ++i) {
      (*recvs)[i].note.assign(in[i].data, std::min<uint64_t>(in[i].bytes, kMaxNoteBytes));
    }
    return Status::Ok();
  }

 private:
  Status CheckWindow(int w, uint64_t offset, uint64_t bytes) const {
    if (w < 0 || w >= static_cast<int>(windows_.size()) || offset > windows_[w].bytes ||
        bytes > windows_[w].bytes - offset) {
      return InvalidArgument("bulk transfer outside window " + std::to_string(w));
    }
    return Status::Ok();
  }
  std::string Peer(int g) const {
    return "rank " + std::to_string(group_->members()[g]) + " (group '" + group_->name() + "')";
  }

  Communicator* group_;
  std::vector<BulkWindow> windows_;
  std::vector<NoteBuf> out_[kRoundsInFlight], in_[kRoundsInFlight];
};

}  // namespace

std::unique_ptr<BulkTransport> CreateBulkOverComm(Communicator* group,
                                                  const std::vector<BulkWindow>& windows) {
  return std::make_unique<BulkOverComm>(group, windows);
}

}  // namespace loom
