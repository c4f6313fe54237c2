// File helpers with Status errors that name the path. Writes are atomic: data goes to
// "<path>.tmp.<pid>", is fsynced, renamed over <path>, and the directory is fsynced, so a crash
// never leaves a half-written file under the final name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace loom {

Result<std::string> ReadFile(const std::string& path);
// ReadFile for files that must be regular files of at most `max_bytes` (checkpoint metadata,
// pointers): a FIFO is refused rather than waited on, a device (a link to /dev/zero) rather than
// read until memory runs out. Errors name the path and what it is.
Result<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes);
Status WriteFileAtomic(const std::string& path, std::string_view data);
// As WriteFileAtomic (a reader sees the old file or the whole new one), without flushing it to
// the disk: for diagnostics that a power failure may lose, written on a path where waiting for a
// flush would hold up something urgent (a restart: an fsync behind other programs' writeback has
// taken 27 s here).
Status WriteFileReplace(const std::string& path, std::string_view data);
// Writes all of `data` to the open descriptor `fd` (short writes continued, EINTR retried);
// errors name `path`.
Status WriteAll(int fd, std::string_view data, const std::string& path);
// Writes `parts` one after another into one file, atomically (no concatenation copy).
Status WriteFileAtomicParts(const std::string& path, const std::string_view* parts, size_t count);
Status FsyncDir(const std::string& dir);
Status MakeDirs(const std::string& dir);
// Makes `dir` (and its parents): true if this call made it, false if it was a directory
// already (decided by mkdir itself, so two processes never both think they made it). Errors
// name `what` and the directory.
Result<bool> MakeDirHere(const std::string& dir, const std::string& what);
// Whether `path` is `dir` or lies under it, comparing absolute paths with symbolic links resolved
// where they exist. True also when either path cannot be resolved (callers refuse then).
bool PathWithin(const std::string& path, const std::string& dir);
// `path` absolute and normalised, links resolved where they exist, without a trailing
// separator ("ck/step_4/", "./ck/step_4" and the absolute path give the same string).
std::string CanonicalPath(const std::string& path);
// An output file a tool may replace: absent, or a regular file (or a link to one), and not inside
// `protect` (the directory it reads). Errors name `what` (e.g. "--safetensors") and the path.
Status CheckOutputFile(const std::string& path, const std::string& protect,
                       const std::string& what);

// An exclusive advisory lock (flock) on a directory, held until destroyed or the process ends:
// two tools writing into one output directory would remove each other's temporary files and
// results. Nothing is created in the directory; a crashed holder releases it.
class DirLock {
 public:
  // Locks `dir` (which must exist) without waiting; if another process holds it, or `dir` was
  // replaced meanwhile, an error naming `what` and the directory.
  static Result<DirLock> TryLock(const std::string& dir, const std::string& what);
  DirLock(DirLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  DirLock& operator=(DirLock&&) = delete;
  ~DirLock();

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// An exclusive lock on the file at `path` (made if absent, left in place), held until destroyed or
// the process ends: an open-file-description record lock (fcntl F_OFD_SETLK), which NFS and
// Lustre pass to the server, so it holds across hosts (flock on a directory does not).
class FileLock {
 public:
  // Locks without waiting. On failure *err is the errno: EAGAIN/EACCES when another process
  // holds the lock, ENOLCK/EOPNOTSUPP/ENOSYS/EINVAL when the file system has none, ENOENT when
  // the directory is gone.
  static Result<FileLock> TryLock(const std::string& path, int* err);
  FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace loom
