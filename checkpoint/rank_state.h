// One rank's training state as checkpoint/ reads and writes it: per bucket of the rank's
// parameter layout, the elements of each state (parallel/state_kind.h) that the rank holds, and
// the optimizer's step count. The save engine (checkpoint/save_engine.h) copies from it, the
// restore (checkpoint/load_state.h) writes into it. The parameter store implements it through an
// adapter in worker/, so checkpoint/ never includes the store, and the store never includes
// checkpoint/.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "parallel/state_kind.h"

namespace loom {

class RankState {
 public:
  virtual ~RankState() = default;

  // For bucket `bucket`: a pointer to element *lo of `state`, and [*lo, *hi) set to the
  // bucket-relative elements this rank holds (of the bucket padded to a multiple of the
  // data(-context) group: zero beyond its real size). The pointer stays valid for the object's
  // lifetime. The save engine's writer thread reads through it while the training thread runs
  // forward and backward; only the optimizer update changes the values (it waits for the copy:
  // SaveEngine::BeforeUpdate).
  virtual float* StateData(StateKind state, int bucket, int64_t* lo, int64_t* hi) = 0;
  // Waits for background work that changes held values (parameter gathers): call before reading
  // more than the owned shard, or before writing.
  virtual Status Quiesce() = 0;
  // From the save engine's writer thread, before it copies `state` of `bucket`: waits until no
  // background work writes those elements (an in-place parameter all-gather may pass other
  // ranks' chunks through this rank's own while it runs).
  virtual Status Settled(StateKind /*state*/, int /*bucket*/) { return Status::Ok(); }
  // After states were written through StateData: drops copies built from the old values.
  virtual void StateLoaded() = 0;
  // AdamW updates applied so far (bias correction); saved and restored with the moments.
  virtual int64_t optimizer_steps() const = 0;
  virtual void set_optimizer_steps(int64_t steps) = 0;
};

}  // namespace loom
