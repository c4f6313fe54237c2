// Restoring from universal checkpoints, as a protocol over the world. Every rank must load the
// same checkpoint, though each reads only the chunks its own layout needs and may fail where
// another succeeds (a damaged chunk is read by the ranks that hold it). So:
//   1. Candidates: world rank 0 lists the checkpoints under a source (a root, newest first, or
//      one step directory) and broadcasts the list: every rank tries the same steps in the same
//      order, whatever its own view of the directory.
//   2. LoadNewest: every rank loads the first candidate (through the caller's LoadCheckpoint:
//      what to read and check is the caller's policy); one all-reduce says whether all did. If
//      not, each failing rank logs why and all fall back to the next one, rank 0 saying so.
//   3. Settle: after resuming, rank 0 warns when `latest` names another checkpoint, and, when
//      the source is the run's own save root, sets the newer checkpoints aside
//      (step_<N>.refused for those refused, step_<N>.abandoned for the others) so that they are
//      neither resumed by a restart nor replaced piecemeal by this run's saves.
// What to restore from (checkpoint.load, .dir, .init_from), with or without the optimizer state,
// and the messages about it are the caller's (worker/checkpointer.h).
//
// Thread-safety: one protocol per rank, used from one thread; every call is collective.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/vote.h"
#include "comm/communicator.h"
#include "core/status.h"

namespace loom {

// Loads the checkpoint in step directory `dir` into this rank; sets *step to its step. An error
// refuses it (the protocol logs it and falls back).
using LoadCheckpoint = std::function<Status(const std::string& dir, int64_t* step)>;

// The checkpoint root of `source`: itself, or the parent of a step directory.
std::string RootOf(const std::string& source);

struct RestoreChoice {
  std::string dir;   // the step directory every rank loaded
  int64_t step = 0;  // its step
  size_t index = 0;  // its place in the candidates: those before it were refused
};

class RestoreProtocol {
 public:
  // `world`: null for one process; must outlive the protocol.
  RestoreProtocol(int world_rank, Communicator* world);

  // The steps saved under `source`, newest first, as world rank 0 lists them. None is NotFound
  // naming `where` when `required`; rank 0's listing error (a damaged step directory) becomes
  // every rank's.
  Result<std::vector<int64_t>> Candidates(const std::string& source, bool required,
                                          const std::string& where);
  // Loads the newest of `steps` under `source` that every rank loads without error, falling back
  // to older ones and saying why. DataLoss naming `where` and every candidate when none loads.
  Result<RestoreChoice> LoadNewest(const std::string& source, const std::vector<int64_t>& steps,
                                   const std::string& where, const LoadCheckpoint& load);
  // After resuming `choice` from `source`'s candidates `steps`: the `latest` warning, and with
  // `set_aside` the newer checkpoints set aside and `latest` pointed at `choice` (an error on
  // every rank if rank 0 could not move one: it would stay loadable).
  Status Settle(const std::string& source, const std::vector<int64_t>& steps,
                const RestoreChoice& choice, bool set_aside);

 private:
  // Replaces *steps by world rank 0's list (a broadcast). `listed`: whether rank 0 could list
  // them; its error becomes every rank's (so no rank is left waiting in the broadcast).
  Status AgreeOnSteps(std::vector<int64_t>* steps, const Status& listed);
  // Rank 0: warns when `latest` under `root` names another checkpoint than the newest complete
  // one that was resumed.
  void WarnIfLatestDiffers(const std::string& root, const RestoreChoice& choice) const;
  // Rank 0: renames checkpoints newer than `loaded` under `root` to step_<N>.refused (those in
  // `refused`) or step_<N>.abandoned and points `latest` at `loaded`.
  Status SetAsideNewer(const std::string& root, int64_t loaded,
                       const std::vector<int64_t>& refused) const;

  int rank_;
  Communicator* world_;
  WorldVote vote_;
};

}  // namespace loom
