// How much of the communication that runs alongside computation stays hidden. Three effects,
// each a pure formula of seconds:
//  - a transfer hides behind the compute it overlaps only up to that compute's length: the
//    excess shows (per layer, as the runtime issues one layer's bucket at a time);
//  - a link carries one byte at a time whoever sends it: when several parallel dimensions use
//    the same link class (NVLink inside a node, the node's network between nodes) during one
//    window, their busy times add up, and what exceeds the window shows;
//  - a transfer running alongside compute is not free for the compute either: NCCL's kernels hold
//    SMs exclusively while they run (one per channel), so compute loses `slowdown` of its speed
//    for the duration of the overlap; on CPU ranks the cores move the bytes themselves, and the
//    compute loses `slowdown` (measured, can exceed 1) seconds per second of transfer.
#pragma once

#include "coordinator/planner/comm_model.h"

namespace loom {

enum LinkClass { kIntraNode = 0, kInterNode = 1, kNumLinkClasses = 2 };

// The link class a group's transfers load: the node's network when the group spans nodes (its
// slowest hop is then a network hop), NVLink (or shared memory) otherwise.
inline LinkClass ClassOf(const GroupPath& g) {
  return g.nodes > 1 ? kInterNode : kIntraNode;
}

// Seconds each link class of one rank is busy during a window.
struct LinkLoad {
  double busy[kNumLinkClasses] = {0, 0};
  void Add(const GroupPath& g, double seconds) {
    if (g.size > 1) busy[ClassOf(g)] += seconds;
  }
  double Max() const { return busy[0] > busy[1] ? busy[0] : busy[1]; }
  LinkLoad& operator+=(const LinkLoad& o) {
    for (int i = 0; i < kNumLinkClasses; ++i) busy[i] += o.busy[i];
    return *this;
  }
  LinkLoad Scaled(double k) const {
    LinkLoad r;
    for (int i = 0; i < kNumLinkClasses; ++i) r.busy[i] = busy[i] * k;
    return r;
  }
};

// Exposed time of asynchronous traffic in one window, by cause. `own` is the part that the
// dimension being priced would expose if it had its links alone; `shared` is what other traffic
// on the same links adds; `slowdown` is compute slowed by the transfers it overlaps.
struct Exposure {
  double own = 0, shared = 0, slowdown = 0;
  double total() const { return own + shared + slowdown; }
};

// One window of the critical path (compute plus the transfers that wait on the critical path):
//  window   seconds of the critical path the asynchronous traffic can hide behind;
//  compute  seconds of it the device computes (what a concurrent transfer slows);
//  own      link seconds of the asynchronous traffic being priced, alone on its links;
//  load     busy seconds of every link class in the window, from all traffic, critical and
//           asynchronous (own included);
//  async    link seconds of all asynchronous traffic running alongside the compute;
//  slowdown compute seconds lost per second of transfer running alongside (calibration.h;
//           a fraction of the compute speed on GPUs, >= 1 possible on CPU ranks).
// The window then lasts window + total(): at least as long as its busiest link and at least
// compute + slowdown * (overlapped seconds).
Exposure Overlap(double window, double compute, double own, const LinkLoad& load, double async,
                 double slowdown);

// n equal transfers of `each` seconds issued one after another as a compute window of `window`
// seconds progresses (the first ready after window / n; gradients of layer after layer), or
// needed one after another as it progresses (gathers before each layer's forward): the seconds
// the serial chain extends past the window. At least `each` (one transfer never overlaps).
double SerialChainExposed(int n, double each, double window);

}  // namespace loom
