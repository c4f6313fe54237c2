// Communication costs: every collective as alpha + beta * bytes per algorithm step on the link it
// crosses (Thakur et al. 2005; NCCL's ring and tree). A group is summarised by its GroupPath:
// size, the slowest per-member bandwidth along its ring, and the largest per-message latency.
// Pure arithmetic, seconds and bytes.
//
// Where `loom calibrate` measured the runtime's own collectives for a group size (groups inside
// one node), those measurements replace the formulas: on shared-memory CPU ranks an all-gather is
// a plain copy while an all-reduce also adds, and both differ by message size in ways one alpha
// and one bandwidth cannot describe (ENVIRONMENT: 3.6 GB/s at 1 MiB, 1.5 GB/s at 64 MiB).
#pragma once

#include <map>
#include <utility>
#include <vector>

namespace loom {

enum class CollOp { kAllReduce, kAllGather, kReduceScatter, kSendRecv };

// The median of repeated measurements (the mean of the two middle ones for an even count): one
// calibration taken while the VM was slow must not move the figure by itself. `v` not empty.
double Median(std::vector<double> v);

// Measured seconds of collectives by operation, group size and bytes (the whole buffer, as the
// formulas below count it; send/recv: one message each way between two neighbours at once).
class MeasuredCollectives {
 public:
  // Repeated measurements of one (op, ranks, bytes) count by their median.
  void Add(CollOp op, int ranks, double bytes, double seconds);
  // Seconds for `bytes`: linear between the two nearest samples, at the largest sample's
  // bandwidth beyond it, and no faster than the smallest sample below it (latency dominates).
  // Negative when (op, ranks) was never measured.
  double Time(CollOp op, int ranks, double bytes) const;
  bool Has(int ranks) const;
  bool empty() const { return samples_.empty(); }

 private:
  struct Sample {
    double bytes = 0, seconds = 0;  // seconds: the median of `all`
    std::vector<double> all;
  };
  std::map<std::pair<int, int>, std::vector<Sample>> samples_;  // (op, ranks) -> by bytes
};

struct GroupPath {
  int size = 1;          // members
  int nodes = 1;         // distinct nodes the group spans
  double latency = 0;    // seconds per message on the slowest hop
  double bandwidth = 0;  // bytes/s each member can push along the ring's slowest hop
  // Seconds each synchronisation waits for its latest member beyond the transfer itself, when
  // the members compute between collectives (calibration's sync_wait; 0: they arrive together).
  // Added once to every collective and hop below.
  double sync_wait = 0;
  // Measured collectives of this group size (groups inside one node), or null: the formulas.
  // Points into the Hardware the path was built from (placement.h), valid while it lives.
  const MeasuredCollectives* measured = nullptr;
};

enum class Algo { kRing, kTree };
const char* AlgoName(Algo a);

// Ring all-reduce: 2(N-1) steps of S/N bytes: 2(N-1) alpha + 2 (N-1)/N S / bw.
double RingAllReduce(const GroupPath& g, double bytes);
// Double binary tree (across nodes): 2 log2(N) alpha + 2 S / bw; better for small messages.
double TreeAllReduce(const GroupPath& g, double bytes);
// The faster of the two (as NCCL's tuner picks); `algo` (optional) receives which.
double AllReduce(const GroupPath& g, double bytes, Algo* algo = nullptr);
// Ring reduce-scatter / all-gather of a buffer of `bytes` in total: (N-1) alpha + (N-1)/N S / bw.
double ReduceScatter(const GroupPath& g, double bytes);
double AllGather(const GroupPath& g, double bytes);
// One point-to-point message over the path's slowest hop.
double PointToPoint(const GroupPath& g, double bytes);

}  // namespace loom
