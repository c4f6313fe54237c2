// The parameter store as checkpoint/'s RankState (checkpoint/rank_state.h): the one place where
// the checkpoint code meets the store's interface, so checkpoint/ never includes the store and
// the store never includes checkpoint/.
#pragma once

#include "checkpoint/rank_state.h"
#include "parallel/zero/param_store.h"

namespace loom {

// Forwards to the store, which must outlive it.
class StoreState final : public RankState {
 public:
  explicit StoreState(ParamStore* store) : store_(store) {}
  float* StateData(StateKind state, int bucket, int64_t* lo, int64_t* hi) override {
    return store_->StateData(state, bucket, lo, hi);
  }
  Status Quiesce() override { return store_->Quiesce(); }
  Status Settled(StateKind state, int bucket) override { return store_->Settled(state, bucket); }
  void StateLoaded() override { store_->StateLoaded(); }
  int64_t optimizer_steps() const override { return store_->optimizer_steps(); }
  void set_optimizer_steps(int64_t steps) override { store_->set_optimizer_steps(steps); }

 private:
  ParamStore* store_;
};

}  // namespace loom
