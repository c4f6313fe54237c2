// Communication costs: every collective as alpha + beta * bytes per algorithm step on the link it
// crosses (Thakur et al. 2005; NCCL's ring and tree). A group is summarised by its GroupPath:
// size, the slowest per-member bandwidth along its ring, and the largest per-message latency.
// Pure arithmetic, seconds and bytes.
#pragma once

namespace loom {

struct GroupPath {
  int size = 1;          // members
  int nodes = 1;         // distinct nodes the group spans
  double latency = 0;    // seconds per message on the slowest hop
  double bandwidth = 0;  // bytes/s each member can push along the ring's slowest hop
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
