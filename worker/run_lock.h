// One run at a time in checkpoint.dir (docs/CHECKPOINT.md): world rank 0 makes the directory if
// it is absent and holds an exclusive lock on <dir>/.loom.lock for the whole run — a second run
// pointed at it (a requeued job started while the first still runs, the same command in
// another terminal) would otherwise delete the first's save in progress as a leftover, and its
// checkpoints by retention. Holding the lock, rank 0 removes what interrupted saves, imports
// and updates left there. At the end, a directory the run made and left holding nothing but
// the lock file is removed again.
//
// Thread-safety: rank 0's training thread.
#pragma once

#include <memory>
#include <string>

#include "core/file_util.h"
#include "core/status.h"
#include "core/tunables.h"

namespace loom {

// LOOM_CKPT_LOCK_WAIT_MS (default 10000): how long a run waits for checkpoint.dir's lock.
extern const IntTunable kCkptLockWaitTunable;

class RunLock {
 public:
  RunLock() = default;
  // Destroy only once nothing writes into the directory any more (the save engine is gone).
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  // Makes `dir` if absent and takes its lock (kRunLockFile), waiting up to
  // LOOM_CKPT_LOCK_WAIT_MS (10 s) for another holder to end; then FailedPrecondition naming
  // `field`. A file system without locks: a warning, no lock. Only the first call acts (a
  // restore done again, as the benchmark's loads, keeps the lock).
  Status Acquire(const std::string& dir, const std::string& field);

 private:
  std::string dir_;
  std::unique_ptr<FileLock> lock_;
  bool tried_ = false;
  bool made_dir_ = false;  // Acquire made dir_ (removed at the end if empty)
};

// With the lock held: removes from `dir` the temporary directories of saves that never
// committed and of an interrupted init_from import, and the temporary files of a `latest` or
// load_origin replacement cut short. Nothing reads them.
void RemoveLeftovers(const std::string& dir);

}  // namespace loom
