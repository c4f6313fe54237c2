// Bulk transfers into peers' registered memory, for the in-memory snapshots' fragments (DESIGN
// §2: UCX carries bulk point-to-point traffic where MPI is not the right tool). A transport
// serves one group (a communicator's members). Every member registers the same number of
// windows (memory peers write into: its snapshot segment, a staging area); a send names the
// peer, the window and the offset in it, so the bytes land in place with no copy on the
// receiving side. Each send carries a small note (the fragment's digests) that the receiver gets
// with it.
//
// Backends:
//   ucx   comm/ucx/: one UCP worker per rank, the windows mapped with ucp_mem_map; a send is a
//         ucp_put into the peer's window, then a flush (the bytes are in the peer's memory),
//         then a put of the note into the peer's notice area, which the peer polls. Shared memory
//         (posix, sysv, cma) on one host; RDMA or TCP across hosts. Built where UCX is found.
//   comm  comm/bulk_over_comm.cc: the group's communicator (MPI or ranks-as-threads): each send
//         is a point-to-point message received straight into the window, then its note. The
//         fallback where UCX is absent or cannot start.
//
// One Exchange is one round: every member passes what it sends and what it expects to receive
// in this round (both sides know the plan), and Exchange returns once every send is
// acknowledged (its bytes are in the peer's window) and every receive has arrived with its note,
// or DeadlineExceeded naming the peers that did not deliver. Rounds are numbered, the same number
// on every member, increasing; a member may run at most kRoundsInFlight rounds ahead of another.
//
// Thread-safety: Create and the destructor on any one thread; Exchange from one thread at a time
// (the snapshot writer). The windows and the communicator must outlive the transport, and the
// communicator must carry no other point-to-point traffic (the fallback's tags are 0..7); after
// a failed Exchange peers may still write into the windows, so their owner keeps them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"

namespace loom {

inline constexpr size_t kMaxNoteBytes = 768;
inline constexpr int kRoundsInFlight = 4;

struct BulkWindow {
  char* base = nullptr;
  uint64_t bytes = 0;
};

struct BulkSend {
  int peer = 0;  // group rank
  int window = 0;
  uint64_t offset = 0;  // into the peer's window
  const char* src = nullptr;
  uint64_t bytes = 0;
  std::string note;  // at most kMaxNoteBytes
};

struct BulkRecv {
  int peer = 0;  // group rank
  int window = 0;
  uint64_t offset = 0;  // into this rank's window
  uint64_t bytes = 0;
  std::string note;  // filled in by Exchange
};

class BulkTransport {
 public:
  virtual ~BulkTransport() = default;
  virtual const char* name() const = 0;  // "ucx", "comm"
  // Sends at most one message per (peer, round) and receives at most one per (peer, round).
  virtual Status Exchange(uint64_t round, const std::vector<BulkSend>& sends,
                          std::vector<BulkRecv>* recvs, Deadline deadline) = 0;
};

enum class BulkKind { kAuto, kUcx, kComm };

// Collective over `group`'s members (each passes its own windows, the same number): registers
// the windows and connects the members. kAuto: UCX where it was built and starts, else the
// communicator (with a log line saying why). `group` must outlive the transport.
Result<std::unique_ptr<BulkTransport>> CreateBulkTransport(BulkKind kind, Communicator* group,
                                                           const std::vector<BulkWindow>& windows);
// Whether this build has the UCX transport.
bool UcxBuilt();
// LOOM_SNAPSHOT_TRANSPORT=auto|ucx|comm (default auto).
Result<BulkKind> SnapshotTransportKind();

// The communicator fallback alone (tests, and kAuto without UCX).
std::unique_ptr<BulkTransport> CreateBulkOverComm(Communicator* group,
                                                  const std::vector<BulkWindow>& windows);

}  // namespace loom
