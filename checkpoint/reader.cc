// Intersecting reads with block checksums.
#include "checkpoint/reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/crc32c.h"

namespace loom {

Region ChunkRegion(const proto::Chunk& c, int dims) {
  Region r;
  r.row0 = c.region_offsets(0);
  r.rows = c.region_sizes(0);
  r.col0 = dims > 1 ? c.region_offsets(1) : 0;
  r.cols = dims > 1 ? c.region_sizes(1) : 1;
  r.flat_begin = c.flat_begin();
  r.flat_end = c.flat_end();
  return r;
}

Result<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(const std::string& dir) {
  std::unique_ptr<CheckpointReader> r(new CheckpointReader());
  r->dir_ = dir;
  LOOM_ASSIGN_OR_RETURN(r->meta_, ReadMetadata(dir));
  // The chunks of file `name` with bytes at or past `end` ("" when none): the first one named,
  // so that a damaged file's message says which tensors it takes with it.
  auto chunks_past = [&](const std::string& name, uint64_t end) {
    std::string first;
    int count = 0;
    for (const proto::TensorEntry& t : r->meta_.tensors()) {
      for (int k = 0; k < t.chunks_size(); ++k) {
        const proto::Chunk& c = t.chunks(k);
        if (c.file() != name || c.offset() + c.length() <= end) continue;
        if (count++ == 0) {
          first = "tensor '" + t.name() + "' state '" + t.state() + "' chunk " + std::to_string(k) +
                  " (bytes " + std::to_string(c.offset()) + ".." +
                  std::to_string(c.offset() + c.length()) + ")";
        }
      }
    }
    if (count == 0) return std::string();
    return "; lost: " + first +
           (count > 1 ? " and " + std::to_string(count - 1) + " more chunk(s)" : std::string());
  };
  for (const proto::FileEntry& f : r->meta_.files()) {
    const std::string path = JoinPath(dir, f.name());
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      return DataLoss(path + ": missing data file of the checkpoint (" + std::strerror(errno) +
                      ")" + chunks_past(f.name(), 0));
    }
    if (!S_ISREG(st.st_mode)) {
      return DataLoss(path + ": not a regular file; expected the checkpoint's data file" +
                      chunks_past(f.name(), 0));
    }
    if (static_cast<uint64_t>(st.st_size) != f.bytes()) {
      return DataLoss(path + ": truncated or overwritten: " + std::to_string(st.st_size) +
                      " bytes, the metadata says " + std::to_string(f.bytes()) +
                      chunks_past(f.name(), static_cast<uint64_t>(st.st_size)));
    }
  }
  LOOM_RETURN_IF_ERROR(r->Index(JoinPath(dir, kMetadataFile)));
  return r;
}

Result<std::unique_ptr<CheckpointReader>> CheckpointReader::OpenFrom(
    proto::CheckpointMetadata meta, ByteSource* source, const std::string& where) {
  std::unique_ptr<CheckpointReader> r(new CheckpointReader());
  r->dir_ = where;
  r->meta_ = std::move(meta);
  r->source_ = source;
  if (r->meta_.checksum_block_bytes() == 0) {
    return DataLoss(where + ": field 'checksum_block_bytes' is 0");
  }
  LOOM_RETURN_IF_ERROR(r->Index(where));
  return r;
}

Status CheckpointReader::Index(const std::string& meta_path) {
  for (const proto::TensorEntry& t : meta_.tensors()) {
    Entry& e = index_[{t.name(), t.state()}];
    if (e.tensor != nullptr) {
      return DataLoss(meta_path + ": tensor '" + t.name() + "' state '" + t.state() +
                      "' is listed twice");
    }
    e.tensor = &t;
    for (int k = 0; k < t.chunks_size(); ++k) {
      e.chunks.push_back({&t.chunks(k), ChunkRegion(t.chunks(k), t.shape_size()), k});
    }
    LOOM_RETURN_IF_ERROR(CheckCoverage(meta_path, e));
  }
  return Status::Ok();
}

Status CheckpointReader::CheckCoverage(const std::string& where, const Entry& e) {
  // Every element of the tensor in exactly one chunk, checked on intervals of global flat
  // indices (a full-width box is one interval, a column slab one per row), without reading data.
  const int64_t rows = e.tensor->shape(0);
  const int64_t cols = e.tensor->shape_size() > 1 ? e.tensor->shape(1) : 1;
  struct Span {
    int64_t begin, end;
    int chunk;
  };
  std::vector<Span> spans;
  for (const ChunkRef& c : e.chunks) {
    const Region& r = c.region;
    if (r.cols == cols) {
      spans.push_back({r.row0 * cols + r.flat_begin, r.row0 * cols + r.flat_end, c.index});
      continue;
    }
    for (int64_t i = r.flat_begin / r.cols; i * r.cols < r.flat_end; ++i) {
      const int64_t a = std::max(i * r.cols, r.flat_begin),
                    b = std::min((i + 1) * r.cols, r.flat_end);
      const int64_t g = (r.row0 + i) * cols + r.col0;
      spans.push_back({g + a - i * r.cols, g + b - i * r.cols, c.index});
    }
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  const std::string what =
      where + ": tensor '" + e.tensor->name() + "' state '" + e.tensor->state() + "'";
  int64_t at = 0;
  for (const Span& sp : spans) {
    if (sp.begin < at) {
      return DataLoss(what + ": chunk " + std::to_string(sp.chunk) +
                      " overlaps another chunk at element (" + std::to_string(sp.begin / cols) +
                      ", " + std::to_string(sp.begin % cols) + ")");
    }
    if (sp.begin > at) break;
    at = sp.end;
  }
  if (at != rows * cols) {
    return DataLoss(what + ": no chunk holds element (" + std::to_string(at / cols) + ", " +
                    std::to_string(at % cols) + ") (a chunk is missing)");
  }
  return Status::Ok();
}

CheckpointReader::~CheckpointReader() {
  for (auto& [name, fd] : fds_) ::close(fd);
}

Result<int> CheckpointReader::Fd(const std::string& file) {
  auto it = fds_.find(file);
  if (it != fds_.end()) return it->second;
  const std::string path = JoinPath(dir_, file);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open '" + path + "'", errno);
  fds_[file] = fd;
  return fd;
}

std::string CheckpointReader::Where(const Entry& e, const ChunkRef& c) const {
  return JoinPath(dir_, c.chunk->file()) + ": tensor '" + e.tensor->name() + "' state '" +
         e.tensor->state() + "' chunk " + std::to_string(c.index);
}

const proto::TensorEntry* CheckpointReader::Find(const std::string& name, StateKind state) const {
  auto it = index_.find({name, StateName(state)});
  return it == index_.end() ? nullptr : it->second.tensor;
}

namespace {

// pread of exactly n bytes at `offset`; DataLoss when the file ends first.
Status PreadAll(int fd, char* dst, uint64_t n, uint64_t offset, const std::string& where) {
  uint64_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, dst + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoError("read " + where, errno);
    if (r == 0) return DataLoss(where + ": file ends inside the chunk");
    done += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

}  // namespace

Status CheckpointReader::Fetch(const std::string& file, char* dst, uint64_t n, uint64_t offset,
                               const std::string& where) {
  if (stream_ != nullptr) return stream_->Next(file, offset, n, dst);
  if (source_ != nullptr) return source_->Read(file, offset, n, dst).WithContext(where);
  LOOM_ASSIGN_OR_RETURN(int fd, Fd(file));
  return PreadAll(fd, dst, n, offset, where);
}

Status CheckpointReader::ReadBlocks(const Entry& e, const ChunkRef& c, uint64_t first,
                                    uint64_t last, std::vector<char>* buf) {
  const proto::Chunk& ch = *c.chunk;
  const uint64_t block = meta_.checksum_block_bytes();
  const uint64_t begin = first * block, end = std::min(ch.length(), (last + 1) * block);
  buf->resize(end - begin);
  const std::string where = Where(e, c);
  LOOM_RETURN_IF_ERROR(Fetch(ch.file(), buf->data(), buf->size(), ch.offset() + begin, where));
  bytes_read_ += buf->size();
  for (uint64_t b = first; b <= last; ++b) {
    const uint64_t at = b * block - begin;
    const uint64_t len = std::min(block, ch.length() - b * block);
    if (Crc32c(buf->data() + at, len) != ch.crc32c(static_cast<int>(b))) {
      return DataLoss(where + ": checksum mismatch in block " + std::to_string(b) + " (bytes " +
                      std::to_string(ch.offset() + b * block) + ".." +
                      std::to_string(ch.offset() + b * block + len) + " of the file)");
    }
  }
  return Status::Ok();
}

Status CheckpointReader::ReadWhole(const Entry& e, const ChunkRef& c, char* dst) {
  const proto::Chunk& ch = *c.chunk;
  const uint64_t block = meta_.checksum_block_bytes();
  const std::string where = Where(e, c);
  LOOM_RETURN_IF_ERROR(Fetch(ch.file(), dst, ch.length(), ch.offset(), where));
  bytes_read_ += ch.length();
  for (uint64_t at = 0, b = 0; at < ch.length(); at += block, ++b) {
    const uint64_t len = std::min(block, ch.length() - at);
    if (Crc32c(dst + at, len) != ch.crc32c(static_cast<int>(b))) {
      return DataLoss(where + ": checksum mismatch in block " + std::to_string(b) + " (bytes " +
                      std::to_string(ch.offset() + at) + ".." +
                      std::to_string(ch.offset() + at + len) + " of the file)");
    }
  }
  return Status::Ok();
}

bool CheckpointReader::PlanChunk(const ChunkRef& c, const Region& region, bool* whole,
                                 uint64_t* first, uint64_t* last) {
  segs_.clear();
  const int64_t n = Intersect(c.region, region, &segs_);
  if (n == 0) return false;
  *whole = segs_.size() == 1 && n == c.region.size();
  if (*whole) return true;
  int64_t lo = segs_.front().src, hi = 0;
  for (const CopySegment& s : segs_) {
    lo = std::min(lo, s.src);
    hi = std::max(hi, s.src + s.count);
  }
  const uint64_t block = meta_.checksum_block_bytes();
  *first = static_cast<uint64_t>(lo) * 4 / block;
  *last = (static_cast<uint64_t>(hi) * 4 - 1) / block;
  return true;
}

void CheckpointReader::PlanReads(const std::string& name, StateKind state, const Region& region,
                                 std::vector<FileRange>* out) {
  auto it = index_.find({name, StateName(state)});
  if (it == index_.end()) return;
  const uint64_t block = meta_.checksum_block_bytes();
  for (const ChunkRef& c : it->second.chunks) {
    bool whole = false;
    uint64_t first = 0, last = 0;
    if (!PlanChunk(c, region, &whole, &first, &last)) continue;
    const proto::Chunk& ch = *c.chunk;
    if (whole) {
      out->push_back({ch.file(), ch.offset(), ch.length()});
    } else {  // as ReadBlocks
      const uint64_t begin = first * block, end = std::min(ch.length(), (last + 1) * block);
      out->push_back({ch.file(), ch.offset() + begin, end - begin});
    }
  }
}

Status CheckpointReader::Read(const std::string& name, StateKind state, const Region& region,
                              float* dst) {
  auto it = index_.find({name, StateName(state)});
  if (it == index_.end()) {
    return DataLoss(JoinPath(dir_, kMetadataFile) + ": no tensor '" + name + "' state '" +
                    StateName(state) + "' (missing from the checkpoint)");
  }
  const Entry& e = it->second;
  const uint64_t block = meta_.checksum_block_bytes();
  int64_t covered = 0;
  std::vector<CopySegment>& segs = segs_;
  std::vector<char>& buf = buf_;
  for (const ChunkRef& c : e.chunks) {
    bool whole = false;
    uint64_t first = 0, last = 0;
    if (!PlanChunk(c, region, &whole, &first, &last)) continue;
    for (const CopySegment& s : segs) covered += s.count;
    if (whole) {
      // The whole chunk lands in one run of dst (e.g. saved with this very split, or a row
      // block of a whole tensor): read it in place, no intermediate copy.
      LOOM_RETURN_IF_ERROR(ReadWhole(e, c, reinterpret_cast<char*>(dst + segs[0].dst)));
      continue;
    }
    LOOM_RETURN_IF_ERROR(ReadBlocks(e, c, first, last, &buf));
    const char* base = buf.data() - first * block;
    for (const CopySegment& s : segs) {
      std::memcpy(dst + s.dst, base + s.src * 4, static_cast<size_t>(s.count) * 4);
    }
  }
  if (covered != region.size()) {
    return DataLoss(JoinPath(dir_, kMetadataFile) + ": tensor '" + name + "' state '" +
                    StateName(state) + "': the chunks cover " + std::to_string(covered) + " of " +
                    std::to_string(region.size()) + " elements of " + region.ToString() +
                    " (a chunk is missing)");
  }
  return Status::Ok();
}

Status CheckpointReader::VerifyAll() {
  std::vector<char> buf;
  const std::string meta_path = JoinPath(dir_, kMetadataFile);
  for (auto& [key, e] : index_) {
    // Every element in exactly one chunk (checked on Open too; cheap, on intervals).
    LOOM_RETURN_IF_ERROR(CheckCoverage(meta_path, e));
    for (const ChunkRef& c : e.chunks) {
      const uint64_t blocks = static_cast<uint64_t>(c.chunk->crc32c_size());
      // Whole chunk, a bounded number of blocks at a time.
      for (uint64_t b = 0; b < blocks; b += 64) {
        LOOM_RETURN_IF_ERROR(ReadBlocks(e, c, b, std::min(blocks, b + 64) - 1, &buf));
      }
    }
  }
  return Status::Ok();
}

}  // namespace loom
