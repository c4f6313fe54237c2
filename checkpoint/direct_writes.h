// Large aligned writes that bypass the page cache (O_DIRECT), done by I/O threads from a fixed
// set of buffers.
//
// Why: on storage where one process both reads a checkpoint and writes another (the offline
// resharder), buffered writes compete badly with the reads — the page cache's writeback of
// gigabytes of dirty pages while readahead runs took this VM's disk 2.4x as long as the same
// bytes written with O_DIRECT (docs/BENCHMARKS.md). The buffers are allocated once; the memory
// is buffer_bytes x buffers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"

namespace loom {

// I/O buffers whose size is a multiple of this are placed on its boundaries and backed by
// transparent huge pages where the kernel allows (madvise). Why: an O_DIRECT request is split
// at the device's limit of memory segments (254 on this VM's virtio disk), one per 4 KiB page:
// about 1 MiB. With 2 MiB pages a 2 MiB piece goes to the disk as one request; the resharder's
// reads took 200 requests and 0.7 s of device time for 328 MB, against 420 and 2.6 s.
constexpr size_t kIoPageBytes = 2 << 20;

// `bytes` of memory aligned for O_DIRECT (see kIoPageBytes); never touched here, so unused
// pages cost nothing. Free with std::free.
char* AllocateIoBuffer(size_t bytes);

class DirectWritePool {
 public:
  // The writes of one file: how many are queued or running, and the first error. Owned by the
  // caller; must outlive its writes (Wait before destroying it).
  struct File {
    int direct_fd = -1;    // opened with O_DIRECT
    int buffered_fd = -1;  // the same file without it (O_DIRECT refused at write time)
    std::string path;      // for errors
    int pending = 0;       // GUARDED_BY(pool mu_)
    Status status;         // GUARDED_BY(pool mu_)
  };

  // `buffers` buffers of `buffer_bytes` (a multiple of the O_DIRECT alignment), `threads` I/O
  // threads.
  DirectWritePool(size_t buffer_bytes, int buffers, int threads);
  ~DirectWritePool();  // finishes the queued writes
  DirectWritePool(const DirectWritePool&) = delete;
  DirectWritePool& operator=(const DirectWritePool&) = delete;

  size_t buffer_bytes() const { return buffer_bytes_; }
  // A free buffer; blocks until one is released (by Release or by a finished write).
  char* Acquire();
  char* TryAcquire();  // nullptr when none is free
  void Release(char* buffer);
  // Queues writing buffer[0, n) at `offset` of `file` (n and offset aligned); the buffer is
  // released once written.
  void Write(File* file, char* buffer, size_t n, uint64_t offset);
  // Waits until none of `file`'s writes is queued or running; returns their first error.
  Status Wait(File* file);
  // Bytes written with O_DIRECT so far (the rest fell back to buffered writes).
  uint64_t direct_bytes() const { return direct_bytes_.load(); }

 private:
  struct Job {
    File* file;
    char* buffer;
    size_t n;
    uint64_t offset;
  };
  void Loop();
  Status WriteOne(const Job& job);

  const size_t buffer_bytes_;
  std::vector<char*> all_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<char*> free_;  // GUARDED_BY(mu_)
  std::deque<Job> queue_;    // GUARDED_BY(mu_)
  bool stop_ = false;        // GUARDED_BY(mu_)
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> direct_bytes_{0};
};

}  // namespace loom
