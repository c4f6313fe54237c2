// Restoring a restarted job from the in-memory snapshots of an earlier incarnation (docs/
// SNAPSHOTS.md), collective over the new world, in whatever layout the job has now:
//   1. every rank maps the old segments of its node; one rank per node takes stock of them
//      (slot states, every piece's and parity's digest) and every rank learns what each node has;
//   2. the newest step every old rank's image can be had for is chosen, with the source of every
//      piece (fault/snapshot/recovery_plan.h): node-local memory, else RS decoding from k intact
//      fragments of its row;
//   3. rebuilders fetch the fragments of the pieces to decode (point to point over the world),
//      decode with ISA-L and check each rebuilt piece against its row's manifest;
//   4. the old images are read as a universal checkpoint held in memory: their chunk tables
//      (checkpoint/chunk_table.h) make the metadata, and the checkpoint reader's intersecting
//      reads (checkpoint/load_state.h) fill this rank's state from them, the bytes of other
//      nodes' images fetched first from the ranks that serve them.
// When no snapshot can be restored (more than m nodes of a stripe group lost, nothing sealed),
// nothing is loaded and the result says why: the caller falls back to the last checkpoint.
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/rank_state.h"
#include "core/status.h"
#include "job/job_config.h"
#include "parallel/param_layout.h"
#include "parallel/process_groups.h"
#include "proto/control.pb.h"

namespace loom {

struct SnapshotRestore {
  bool restored = false;
  int64_t step = 0;              // the step restored
  int64_t consumed_samples = 0;  // the data position at that step
  std::string from;              // "in-memory snapshot of step 12: 6 images from local ..."
  std::string why_not;           // when not restored: the reason (for the fallback's message)
  double seconds = 0;
  uint64_t bytes_fetched = 0;    // from other nodes (rebuilds and reads)
};

// `plan`: this incarnation's snapshot plan, whose recovery names the incarnation to restore;
// `place`: this rank's groups; `state`/`params`/`tp_rank`: what to fill. Collective over the
// world. An error only for what fails after a snapshot was chosen (a rebuilt piece that does
// not match its manifest, a transfer that times out): the state may then be half written.
Result<SnapshotRestore> RestoreSnapshot(const proto::SnapshotPlan& plan, const JobConfig& job,
                                        const ProcessGroups& place, RankState* state,
                                        const ParamLayout& params, int tp_rank);

}  // namespace loom
