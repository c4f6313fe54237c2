// I/O threads writing aligned buffers with O_DIRECT.
#include "checkpoint/direct_writes.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "checkpoint/format.h"
#include "core/threads.h"

namespace loom {

char* AllocateIoBuffer(size_t bytes) {
  const bool huge = bytes % kIoPageBytes == 0;
  void* p = nullptr;
  if (::posix_memalign(&p, huge ? kIoPageBytes : kDataAlignment, bytes) != 0) std::abort();
  if (huge) ::madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without it, 4 KiB pages
  return static_cast<char*>(p);
}

DirectWritePool::DirectWritePool(size_t buffer_bytes, int buffers, int threads)
    : buffer_bytes_(buffer_bytes) {
  for (int i = 0; i < buffers; ++i) all_.push_back(AllocateIoBuffer(buffer_bytes));
  free_ = all_;
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      SetThreadName("loom-write");
      Loop();
    });
  }
}

DirectWritePool::~DirectWritePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  for (char* p : all_) std::free(p);
}

char* DirectWritePool::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !free_.empty(); });
  char* p = free_.back();
  free_.pop_back();
  return p;
}

char* DirectWritePool::TryAcquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) return nullptr;
  char* p = free_.back();
  free_.pop_back();
  return p;
}

void DirectWritePool::Release(char* buffer) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(buffer);
  }
  cv_.notify_all();
}

void DirectWritePool::Write(File* file, char* buffer, size_t n, uint64_t offset) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++file->pending;
    queue_.push_back({file, buffer, n, offset});
  }
  cv_.notify_all();
}

Status DirectWritePool::Wait(File* file) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return file->pending == 0; });
  return file->status;
}

Status DirectWritePool::WriteOne(const Job& job) {
  bool direct = true;
  for (size_t at = 0; at < job.n;) {
    const int fd = direct ? job.file->direct_fd : job.file->buffered_fd;
    const ssize_t w =
        ::pwrite(fd, job.buffer + at, job.n - at, static_cast<off_t>(job.offset + at));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && direct) {  // O_DIRECT refused at write time: buffered
      direct = false;
      continue;
    }
    if (w <= 0) return ErrnoError("write '" + job.file->path + "'", w < 0 ? errno : EIO);
    if (direct) direct_bytes_ += static_cast<uint64_t>(w);
    at += static_cast<size_t>(w);
  }
  return Status::Ok();
}

void DirectWritePool::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, and nothing left to write
    const Job job = queue_.front();
    queue_.pop_front();
    // After an error in this file its remaining writes are skipped: the file is abandoned.
    const bool skip = !job.file->status.ok();
    lock.unlock();
    Status st = skip ? Status::Ok() : WriteOne(job);
    lock.lock();
    if (!st.ok() && job.file->status.ok()) job.file->status = st;
    --job.file->pending;
    free_.push_back(job.buffer);
    cv_.notify_all();
  }
}

}  // namespace loom
