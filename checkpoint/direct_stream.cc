// Read-ahead of planned ranges with O_DIRECT.
#include "checkpoint/direct_stream.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "checkpoint/direct_writes.h"
#include "checkpoint/format.h"
#include "core/threads.h"

namespace loom {

Result<std::unique_ptr<DirectStream>> DirectStream::Open(const std::string& dir,
                                                         std::vector<FileRange> ranges,
                                                         uint64_t slot_bytes, int slots,
                                                         int threads, bool direct) {
  if (slot_bytes <= 2 * kAlignment || slot_bytes % kAlignment != 0 || slots < 1 || threads < 1) {
    return InvalidArgument("read-ahead of '" + dir + "': slots of " + std::to_string(slot_bytes) +
                           " bytes (expected a multiple of " + std::to_string(kAlignment) +
                           " above " + std::to_string(2 * kAlignment) + "), " +
                           std::to_string(slots) + " slots, " + std::to_string(threads) +
                           " threads (expected at least 1 each)");
  }
  std::unique_ptr<DirectStream> s(new DirectStream());
  s->dir_ = dir;
  s->ranges_ = std::move(ranges);
  s->slot_bytes_ = slot_bytes;
  const uint64_t piece_max = slot_bytes - 2 * kAlignment;  // room for the widening
  for (const FileRange& r : s->ranges_) {
    auto [it, fresh] = s->fds_.try_emplace(r.file);
    if (fresh) {
      const std::string path = JoinPath(dir, r.file);
      it->second.buffered = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (it->second.buffered < 0) return ErrnoError("open '" + path + "'", errno);
      if (direct) it->second.direct = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
      // mincore answers for a file's pages only to its owner or to one who may write it (else
      // it reports every page resident): otherwise no map, and every piece goes O_DIRECT.
      struct stat st {};
      if (it->second.direct >= 0 && ::fstat(it->second.buffered, &st) == 0 && st.st_size > 0 &&
          (st.st_uid == ::geteuid() ||
           ::faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) == 0)) {
        void* map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED,
                           it->second.buffered, 0);
        if (map != MAP_FAILED) {
          it->second.map = map;
          it->second.map_bytes = static_cast<size_t>(st.st_size);
        }
      }
    }
    // Consecutive ranges of one file that follow each other on it share a piece.
    uint64_t at = r.offset, left = r.n;
    if (!s->pieces_.empty()) {
      Piece& last = s->pieces_.back();
      if (last.file == &it->first && last.offset + last.n == at && last.n < piece_max) {
        const uint64_t take = std::min(left, piece_max - last.n);
        last.n += take;
        at += take;
        left -= take;
      }
    }
    for (; left > 0;) {
      const uint64_t take = std::min(left, piece_max);
      s->pieces_.push_back({&it->second, &it->first, at, take});
      at += take;
      left -= take;
    }
  }
  for (int i = 0; i < slots; ++i) s->slots_.push_back(AllocateIoBuffer(slot_bytes));
  s->ready_.assign(s->pieces_.size(), 0);
  s->status_.resize(s->pieces_.size());
  DirectStream* raw = s.get();
  for (int i = 0; i < threads; ++i) {
    s->threads_.emplace_back([raw] {
      SetThreadName("loom-write");
      raw->Loop();
    });
  }
  return s;
}

DirectStream::~DirectStream() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  for (char* p : slots_) std::free(p);
  for (auto& [file, fds] : fds_) {
    if (fds.direct >= 0) ::close(fds.direct);
    if (fds.buffered >= 0) ::close(fds.buffered);
    if (fds.map != nullptr) ::munmap(fds.map, fds.map_bytes);
  }
}

bool DirectStream::Cached(const Fds& fds, uint64_t begin, uint64_t end) {
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (fds.map == nullptr) return false;
  end = std::min<uint64_t>(end, fds.map_bytes);
  begin = begin / page * page;
  if (begin >= end) return false;
  std::vector<unsigned char> resident((end - begin + page - 1) / page);
  if (::mincore(static_cast<char*>(fds.map) + begin, end - begin, resident.data()) != 0) {
    return false;
  }
  for (unsigned char r : resident) {
    if ((r & 1) == 0) return false;
  }
  return true;
}

Status DirectStream::ReadPiece(const Piece& piece, char* buffer) const {
  // The piece widened at both ends to the alignment; the file may end inside the widening (a
  // short read).
  const uint64_t lead = piece.offset % kAlignment, begin = piece.offset - lead;
  const uint64_t need = lead + piece.n;
  const uint64_t want = (need + kAlignment - 1) / kAlignment * kAlignment;
  const bool cached = piece.fds->direct >= 0 && Cached(*piece.fds, begin, begin + need);
  bool direct = piece.fds->direct >= 0 && !cached, read_direct = false;
  for (uint64_t got = 0; got < need;) {
    // Buffered reads (the fallback) ask for exactly what is needed: no alignment.
    const ssize_t k = ::pread(direct ? piece.fds->direct : piece.fds->buffered, buffer + got,
                              direct ? want - got : need - got, static_cast<off_t>(begin + got));
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && errno == EINVAL && direct) {  // O_DIRECT refused at read time: buffered
      direct = false;
      continue;
    }
    const std::string path = JoinPath(dir_, *piece.file);
    if (k < 0) return ErrnoError("read '" + path + "'", errno);
    if (k == 0) {
      return DataLoss(path + ": file ends at byte " + std::to_string(begin + got) +
                      ", inside a chunk");
    }
    got += static_cast<uint64_t>(k);
    read_direct = read_direct || direct;
    // A short O_DIRECT read leaves `got` unaligned: the rest, if any, is read buffered.
    if (direct && got % kAlignment != 0) direct = false;
  }
  if (cached) ++cached_pieces_;
  if (read_direct) ++direct_pieces_;
  return Status::Ok();
}

void DirectStream::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] {
      return stop_ || (issued_ < pieces_.size() && issued_ < consumed_ + slots_.size());
    });
    if (stop_) return;
    const size_t j = issued_++;
    lock.unlock();
    Status st = ReadPiece(pieces_[j], slots_[j % slots_.size()]);
    lock.lock();
    status_[j] = std::move(st);
    ready_[j] = 1;
    cv_.notify_all();
  }
}

Status DirectStream::Done() const {
  if (next_range_ == ranges_.size()) return Status::Ok();
  const FileRange& r = ranges_[next_range_];
  return Internal(JoinPath(dir_, r.file) + ": bytes " + std::to_string(r.offset) + ".." +
                  std::to_string(r.offset + r.n) + " were planned but not read (" +
                  std::to_string(ranges_.size() - next_range_) + " of " +
                  std::to_string(ranges_.size()) + " ranges left)");
}

Status DirectStream::Next(const std::string& file, uint64_t offset, uint64_t n, char* dst) {
  if (next_range_ >= ranges_.size() || ranges_[next_range_].file != file ||
      ranges_[next_range_].offset != offset || ranges_[next_range_].n != n) {
    return Internal(JoinPath(dir_, file) + ": read of bytes " + std::to_string(offset) + ".." +
                    std::to_string(offset + n) + " was not planned next");
  }
  ++next_range_;
  for (uint64_t done = 0; done < n;) {
    const Piece& p = pieces_[cur_];
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return ready_[cur_] != 0; });
      LOOM_RETURN_IF_ERROR(status_[cur_]);
    }
    const char* data = slots_[cur_ % slots_.size()] + p.offset % kAlignment;
    const uint64_t take = std::min(n - done, p.n - pos_);
    std::memcpy(dst + done, data + pos_, take);
    done += take;
    pos_ += take;
    if (pos_ == p.n) {  // the slot is free for piece cur_ + slots
      pos_ = 0;
      std::lock_guard<std::mutex> lock(mu_);
      consumed_ = ++cur_;
      cv_.notify_all();
    }
  }
  return Status::Ok();
}

}  // namespace loom
