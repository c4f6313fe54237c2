// What a restarted rank found of its node's snapshots: the segments of an earlier incarnation it
// opened, by that incarnation's world rank (null: none on this node). Passed to the fault point
// kSnapshotRestore, where a test may damage them before they are checked.
#pragma once

#include <utility>
#include <vector>

#include "fault/snapshot/segment.h"

namespace loom {

struct SnapshotView {
  std::vector<std::pair<int, Segment*>> segments;
};

}  // namespace loom
