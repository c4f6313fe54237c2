// POSIX file I/O with EINTR retries and errors that name the file.
#include "core/file_util.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <system_error>

namespace loom {

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write '" + path + "'", errno);
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

namespace {

std::string ParentDir(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

namespace {

// Reads `fd` to its end (closing it), refusing more than `max_bytes`.
Result<std::string> ReadToEnd(int fd, const std::string& path, uint64_t max_bytes) {
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    out.reserve(static_cast<size_t>(std::min<uint64_t>(st.st_size, max_bytes)));
  }
  char buf[1 << 16];
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoError("read '" + path + "'", err);
    }
    if (r == 0) break;
    if (out.size() + static_cast<size_t>(r) > max_bytes) {
      ::close(fd);
      return InvalidArgument("'" + path + "': more than " + std::to_string(max_bytes) +
                             " bytes, expected at most that");
    }
    out.append(buf, static_cast<size_t>(r));
  }
  ::close(fd);
  return out;
}

}  // namespace

Result<std::string> ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open '" + path + "'", errno);
  return ReadToEnd(fd, path, UINT64_MAX);
}

Result<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. The checks and the
  // read are on the same descriptor, so the path cannot be swapped in between.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open '" + path + "'", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError("stat '" + path + "'", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISFIFO(st.st_mode)   ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISDIR(st.st_mode)  ? "a directory"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "something else";
    return InvalidArgument("'" + path + "': expected a regular file, found " + kind);
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return InvalidArgument("'" + path + "': " + std::to_string(st.st_size) +
                           " bytes, expected at most " + std::to_string(max_bytes));
  }
  // A regular file: reads block as usual (a FUSE or network file system may honour O_NONBLOCK
  // and answer EAGAIN).
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return ReadToEnd(fd, path, max_bytes);
}

Status WriteFileAtomic(const std::string& path, std::string_view data) {
  return WriteFileAtomicParts(path, &data, 1);
}

namespace {

Status WriteAndRename(const std::string& path, const std::string_view* parts, size_t count,
                      bool sync) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("create '" + tmp + "'", errno);
  Status st;
  for (size_t i = 0; i < count && st.ok(); ++i) st = WriteAll(fd, parts[i], tmp);
  if (sync && st.ok() && ::fsync(fd) != 0) st = ErrnoError("fsync '" + tmp + "'", errno);
  if (::close(fd) != 0 && st.ok()) st = ErrnoError("close '" + tmp + "'", errno);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = ErrnoError("rename '" + tmp + "' to '" + path + "'", errno);
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return sync ? FsyncDir(ParentDir(path)) : Status::Ok();
}

}  // namespace

Status WriteFileAtomicParts(const std::string& path, const std::string_view* parts, size_t count) {
  return WriteAndRename(path, parts, count, /*sync=*/true);
}

Status WriteFileReplace(const std::string& path, std::string_view data) {
  return WriteAndRename(path, &data, 1, /*sync=*/false);
}

Status FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open directory '" + dir + "'", errno);
  Status st;
  if (::fsync(fd) != 0) st = ErrnoError("fsync directory '" + dir + "'", errno);
  ::close(fd);
  return st;
}

bool PathWithin(const std::string& path, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code pe, de;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, pe), pe);
  const fs::path d = fs::weakly_canonical(fs::absolute(dir, de), de);
  if (pe || de) return true;  // cannot tell: the caller refuses rather than risk it
  auto pi = p.begin();
  for (auto di = d.begin(); di != d.end(); ++di, ++pi) {
    if (di->empty()) continue;  // a trailing separator
    if (pi == p.end() || *pi != *di) return false;
  }
  return true;
}

std::string CanonicalPath(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path, ec).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  return p.string();
}

Status CheckOutputFile(const std::string& path, const std::string& protect,
                       const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // follows links
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    return InvalidArgument(what + " '" + path +
                           "': exists and is not a regular file (a directory, device or pipe); "
                           "expected a new file or one to replace");
  }
  if (!protect.empty() && PathWithin(path, protect)) {
    return InvalidArgument(what + " '" + path + "': inside '" + protect +
                           "', which is being read; choose a path outside it");
  }
  return Status::Ok();
}

Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("create directory '" + dir + "': " + ec.message());
  return Status::Ok();
}

Result<DirLock> DirLock::TryLock(const std::string& dir, const std::string& what) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open " + what + " '" + dir + "'", errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return FailedPrecondition(what + " '" + dir +
                                "': another process is writing into it (it holds the directory's "
                                "lock); wait for it or choose another directory");
    }
    return ErrnoError("lock " + what + " '" + dir + "'", err);
  }
  // The directory locked must still be the one at `dir` (not removed and made anew meanwhile).
  struct stat held, now;
  if (::fstat(fd, &held) != 0 || ::stat(dir.c_str(), &now) != 0 || held.st_dev != now.st_dev ||
      held.st_ino != now.st_ino) {
    ::close(fd);
    return FailedPrecondition(what + " '" + dir +
                              "': replaced by another process while being locked; try again");
  }
  return DirLock(fd);
}

Result<bool> MakeDirHere(const std::string& dir, const std::string& what) {
  const std::string parent = ParentDir(dir);
  if (parent != dir) LOOM_RETURN_IF_ERROR(MakeDirs(parent));
  if (::mkdir(dir.c_str(), 0755) == 0) return true;
  const int err = errno;
  std::error_code ec;
  if (err == EEXIST && std::filesystem::is_directory(dir, ec)) return false;
  if (err == EEXIST) return InvalidArgument(what + " '" + dir + "': exists and is not a directory");
  return ErrnoError("create " + what + " '" + dir + "'", err);
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

Result<FileLock> FileLock::TryLock(const std::string& path, int* err) {
  *err = 0;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    *err = errno;
    return ErrnoError("open lock file '" + path + "'", *err);
  }
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;  // the whole file (l_start = l_len = 0)
  if (::fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    *err = errno;
    ::close(fd);
    return ErrnoError("lock '" + path + "'", *err);
  }
  return FileLock(fd);
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace loom
