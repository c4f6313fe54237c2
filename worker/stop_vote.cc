// The per-step stop vote.
#include "worker/stop_vote.h"

namespace loom {

StopVote::StopVote(const CheckpointConfig& config, Communicator* world)
    : enabled_(!config.dir.empty() && (config.stop_signal != 0 || config.exit_after_minutes > 0)),
      world_(world),
      vote_(world) {}

Result<int> StopVote::Vote(int reason) {
  if (!enabled_) return 0;
  if (world_ == nullptr) return reason;
  int agreed = 0;
  if (vote_.started()) {  // started after the previous step: every rank has passed that point
    Result<int> taken = vote_.Take();
    LOOM_RETURN_IF_ERROR(taken.status().WithContext("stop-signal vote"));  // kept: see Take
    agreed = *taken;
  }
  if (agreed == 0) vote_.Start(reason);
  return agreed;
}

Status StopVote::Drain() {
  if (!vote_.started()) return Status::Ok();
  Result<int> taken = vote_.Take();
  return taken.status().WithContext("stop-signal vote");
}

}  // namespace loom
