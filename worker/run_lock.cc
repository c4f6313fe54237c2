// checkpoint.dir's run lock and the removal of leftovers.
#include "worker/run_lock.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <thread>

#include "checkpoint/format.h"
#include "core/logging.h"
#include "core/tunables.h"
#include "worker/init_from.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// How long a run waits for checkpoint.dir's lock (LOOM_CKPT_LOCK_WAIT_MS): a job restarted at
// once after a failure may find its predecessor's rank 0 still exiting.
std::chrono::milliseconds LockWait() {
  return std::chrono::milliseconds(TunableOr(kCkptLockWaitTunable));
}

bool NoLocksHere(int err) {
  return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL;
}

}  // namespace

const IntTunable kCkptLockWaitTunable =
    RegisterTunable({"LOOM_CKPT_LOCK_WAIT_MS", 10000, 0, kMaxTunableMs, "a number of ms"});

RunLock::~RunLock() {
  // A directory this run made and left empty (it failed first, or saved nothing) is not left
  // behind: the lock file goes first, while still held.
  if (made_dir_ && lock_ != nullptr) {
    std::error_code ec;
    bool only_lock = true;
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      only_lock = only_lock && e.path().filename() == kRunLockFile;
    }
    if (!ec && only_lock) {
      ::unlink(JoinPath(dir_, kRunLockFile).c_str());
      ::rmdir(dir_.c_str());
    }
  }
  lock_.reset();
}

Status RunLock::Acquire(const std::string& dir, const std::string& field) {
  if (tried_) return Status::Ok();
  tried_ = true;
  dir_ = dir;
  const std::string path = JoinPath(dir, kRunLockFile);
  const auto deadline = std::chrono::steady_clock::now() + LockWait();
  bool waiting = false;
  for (;;) {
    Result<bool> made = MakeDirHere(dir, "checkpoint.dir");
    if (!made.ok()) return made.status().WithContext(field);
    made_dir_ = made_dir_ || *made;
    int err = 0;
    Result<FileLock> lock = FileLock::TryLock(path, &err);
    if (lock.ok()) {
      lock_ = std::make_unique<FileLock>(std::move(*lock));
      return Status::Ok();
    }
    if (NoLocksHere(err)) {
      LOOM_LOG(WARN, CKPT) << ForUser(lock.status(), LogSubsys::CKPT)
                           << ": this file system has no locks, so a second run in the same "
                              "directory would not be refused";
      return Status::Ok();
    }
    const bool held = err == EAGAIN || err == EACCES;
    if ((!held && err != ENOENT) || std::chrono::steady_clock::now() >= deadline) {
      if (!held) return lock.status().WithContext(field);
      return FailedPrecondition(field + ": '" + dir + "' is in use by another run (it holds " +
                                path + "'s lock; waited " + std::to_string(LockWait().count()) +
                                " ms, LOOM_CKPT_LOCK_WAIT_MS); wait for it to end or choose "
                                "another directory");
    }
    if (held && !waiting) {
      LOOM_LOG(INFO, CKPT) << "waiting for " << path << " (another run holds it)";
      waiting = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void RemoveLeftovers(const std::string& dir) {
  // Rank 0's committer may be writing latest.tmp.<pid> (WriteFileAtomic) when its process dies.
  std::error_code ec;
  const std::string latest_tmp = std::string(kLatestFile) + ".tmp.";
  const std::string origin_tmp = std::string(kLoadOriginFile) + ".tmp.";
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if ((name.rfind("step_", 0) == 0 && name.find(".tmp") != std::string::npos) ||
        name == kInitImportDir) {
      LOOM_LOG(INFO, CKPT) << "removing " << e.path().string()
                           << (name == kInitImportDir ? " (an interrupted import)"
                                                      : " (an interrupted save)");
      fs::remove_all(e.path(), ec);
    } else if (name.rfind(latest_tmp, 0) == 0 || name.rfind(origin_tmp, 0) == 0) {
      LOOM_LOG(INFO, CKPT) << "removing " << e.path().string() << " (an interrupted update)";
      fs::remove(e.path(), ec);
    }
  }
}

}  // namespace loom
