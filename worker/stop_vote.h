// The stop vote (docs/CHECKPOINT.md, "Preemption"): after every step each rank starts a
// one-float max all-reduce over the world of its reason to stop — checkpoint.signal received
// (core/stop_signal.h) or the time limit — and reads the result of the one started after the
// previous step. So the vote never waits, and every rank, including those that got no signal,
// stops after the same step.
//
// Thread-safety: training thread only; every call is collective over the world.
#pragma once

#include "checkpoint/vote.h"
#include "comm/communicator.h"
#include "core/status.h"
#include "job/job_config.h"

namespace loom {

class StopVote {
 public:
  // Votes only when the job saves (checkpoint.dir) and has a stop signal or a time limit.
  // `world`: null for one process; must outlive the vote.
  StopVote(const CheckpointConfig& config, Communicator* world);

  // After every step: `reason` is this rank's (PendingStopSignal, kStopTimeLimit, 0: none).
  // Returns the largest reason of any rank in the vote started after the previous step (0: go
  // on); every rank gets the same answer at the same step.
  Result<int> Vote(int reason);
  // Completes a vote in flight, before other collectives on the world (the final save's votes).
  Status Drain();

 private:
  const bool enabled_;
  Communicator* world_;
  WorldVote vote_;
};

}  // namespace loom
