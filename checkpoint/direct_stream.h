// A planned sequence of file byte ranges, read ahead of its consumer with O_DIRECT by I/O
// threads, several pieces in flight, into a fixed ring of aligned buffers.
//
// Why: the offline resharder reads a whole checkpoint while it writes another with O_DIRECT.
// On this VM's disk buffered reads (readahead: one request at a time) got much less of the
// disk while the writes ran than O_DIRECT reads with several requests in flight (fio: 1 GiB
// read while 1 GiB is written, 1.36 s buffered vs 0.89 s O_DIRECT, queue depth 4). Reading
// ahead through the page cache made reads and writes take turns instead (docs/BENCHMARKS.md).
// The resharder knows every range it will read, in order, before it starts.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/format.h"
#include "core/status.h"

namespace loom {

struct FileRange {
  std::string file;  // name within the stream's directory
  uint64_t offset = 0, n = 0;
};

class DirectStream {
 public:
  // O_DIRECT alignment of offsets, lengths and memory (at least the logical block size of the
  // devices this runs on): reads are widened to it at both ends.
  static constexpr uint64_t kAlignment = kDataAlignment;

  // Streams `ranges` of the files in `dir`, in that order. The ring holds `slots` pieces of up
  // to `slot_bytes` (consecutive ranges of one file merge into a piece); `threads` I/O threads
  // fill it. Memory: slots x slot_bytes (kIoPageBytes makes whole requests: direct_writes.h);
  // a piece is at most slot_bytes - 2 x kAlignment, the room for the widening. A piece whose
  // pages are all in the page cache is copied from it instead (a checkpoint just written or
  // read: memory speed, where O_DIRECT would go to the disk again). Without `direct`, or on a
  // file system without O_DIRECT, every piece is read through the page cache.
  static Result<std::unique_ptr<DirectStream>> Open(const std::string& dir,
                                                    std::vector<FileRange> ranges,
                                                    uint64_t slot_bytes, int slots, int threads,
                                                    bool direct = true);
  ~DirectStream();  // stops the I/O threads; ranges not consumed are dropped
  DirectStream(const DirectStream&) = delete;
  DirectStream& operator=(const DirectStream&) = delete;

  // Copies the next planned range into dst[0, n). It must be (file, offset, n): anything else
  // is an Internal error (the plan and the reads disagree). Blocks until its bytes are read;
  // returns the read's error (naming the file) if it failed.
  Status Next(const std::string& file, uint64_t offset, uint64_t n, char* dst);

  // Internal error (naming the first) when planned ranges were not asked for: the plan and
  // the reads disagree.
  Status Done() const;

  // Pieces read so far with O_DIRECT, and copied from the page cache where all were in it.
  int64_t direct_pieces() const { return direct_pieces_.load(); }
  int64_t cached_pieces() const { return cached_pieces_.load(); }

 private:
  struct Fds {
    int direct = -1, buffered = -1;
    void* map = nullptr;  // the file mapped (never touched): which pages are in the page cache
    size_t map_bytes = 0;
  };
  struct Piece {
    const Fds* fds;
    const std::string* file;
    uint64_t offset, n;  // the file's bytes [offset, offset + n)
  };
  DirectStream() = default;
  void Loop();
  Status ReadPiece(const Piece& piece, char* buffer) const;
  // True when every page of the file's bytes [begin, end) is in the page cache (mincore).
  static bool Cached(const Fds& fds, uint64_t begin, uint64_t end);

  std::string dir_;
  std::vector<FileRange> ranges_;
  std::map<std::string, Fds> fds_;
  std::vector<Piece> pieces_;
  uint64_t slot_bytes_ = 0;
  std::vector<char*> slots_;  // piece j is read into slots_[j % slots_.size()]
  // The consumer's place: range `next_range_`, in piece `cur_` at byte `pos_` of it.
  size_t next_range_ = 0, cur_ = 0;
  uint64_t pos_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  size_t issued_ = 0;           // GUARDED_BY(mu_): pieces [0, issued_) taken by a thread
  size_t consumed_ = 0;         // GUARDED_BY(mu_): pieces [0, consumed_) copied out
  std::vector<char> ready_;     // GUARDED_BY(mu_): piece j read
  std::vector<Status> status_;  // GUARDED_BY(mu_): piece j's read error
  bool stop_ = false;           // GUARDED_BY(mu_)
  std::vector<std::thread> threads_;
  mutable std::atomic<int64_t> direct_pieces_{0}, cached_pieces_{0};
};

}  // namespace loom
