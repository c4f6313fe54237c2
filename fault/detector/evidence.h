// What the anomaly detector reads (docs/FAULTS.md): per step, each rank's calls with their entry
// and exit times on the coordinator's clock, and its compute time; live, each rank's latest beat
// (what it is blocked on, what it has issued). Plain values: the coordinator converts the
// control-plane messages into them, tests make them up.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loom::detect {

// A communication group instance: its name ("dp", "tp", ...) and members (world ranks, by group
// rank). Its key, name@first-member, tells apart the groups of one name ("dp@0", "dp@1").
struct GroupInfo {
  std::string name;
  std::vector<int> members;
};
std::string GroupKey(const std::string& name, const std::vector<int>& members);
std::string GroupKey(const std::string& name, int first_member);

// One call of one rank. Times in ns on the coordinator's clock (each rank's offset corrected).
struct CallEvidence {
  std::string op;     // "all_reduce", "send", "recv", ...
  std::string group;  // group key (GroupKey)
  uint64_t seq = 0;   // the rank's sequence number on that group
  int64_t enter_ns = 0;
  int64_t exit_ns = 0;  // 0: had not finished when the rank closed it
  int64_t bytes = 0;
  int peer = -1;  // send: destination, recv: source (world ranks); else -1
  int tag = -1;
};

// One rank's evidence of one step.
struct RankStep {
  int rank = 0;
  int64_t step = 0;
  int64_t start_ns = 0, end_ns = 0;  // the step's wall interval (coordinator clock)
  int64_t compute_ns = 0;            // the step's time not blocked waiting on communication
  std::vector<CallEvidence> calls;   // in the order they closed
  std::string cpus;                  // the CPUs its compute is pinned to ("": not pinned)
};

// A rank's live state, from its latest beat.
struct Beat {
  int rank = 0;
  double received_s = -1;  // when the coordinator received it (its clock); < 0: never
  // When the rank sent its latest message (coordinator clock, by the rank's offset estimate;
  // < 0: not known): a coordinator short of CPU time may read it seconds later.
  double sent_s = -1;
  int64_t step = 0;            // last completed step
  bool io = false;             // in checkpoint or snapshot I/O: long pauses are expected
  bool blocked = false;        // its caller waits on a call
  std::string op, group;       // that call (when blocked)
  uint64_t seq = 0;            // a collective: its index among the group's collectives on this rank
  int peer = -1;               // a send or receive: its peer (world rank)
  double blocked_since_s = 0;  // coordinator clock
  // Per group key: how many collectives it has issued on that group (sends and receives are
  // matched by peer instead: their counts differ between the two ends).
  std::map<std::string, uint64_t> issued;
};

}  // namespace loom::detect
