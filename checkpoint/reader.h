// Reading a universal checkpoint into any region of any tensor: the reader finds the chunks that
// intersect the region, reads only the checksum blocks that hold the wanted bytes, verifies each
// block's CRC-32C and copies the intersecting runs. Errors name the file, tensor, state and chunk.
//
// Not thread-safe (one reader per thread); file descriptors are kept open until destruction.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/direct_stream.h"
#include "checkpoint/format.h"
#include "checkpoint/region.h"
#include "checkpoint/shard_plan.h"
#include "core/status.h"

namespace loom {

// Where a reader takes the bytes of a checkpoint that is not in files: n bytes of `file` at
// `offset` into dst (DataLoss or IoError naming what failed).
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual Status Read(const std::string& file, uint64_t offset, uint64_t n, char* dst) = 0;
};

class CheckpointReader {
 public:
  // Parses and validates the metadata, checks every data file's size against its listing (a
  // truncated file is refused here) and that the chunks of every tensor hold each element
  // exactly once (a missing or duplicated chunk is refused here).
  static Result<std::unique_ptr<CheckpointReader>> Open(const std::string& dir);
  // A checkpoint whose metadata is `meta` and whose files' bytes come from `source` (not
  // owned; it must outlive the reader), e.g. in-memory snapshots. The same checks of the chunks
  // as Open; `where` names it in messages, as a directory would.
  static Result<std::unique_ptr<CheckpointReader>> OpenFrom(proto::CheckpointMetadata meta,
                                                            ByteSource* source,
                                                            const std::string& where);
  ~CheckpointReader();

  const proto::CheckpointMetadata& meta() const { return meta_; }
  const std::string& dir() const { return dir_; }

  // Fills dst[0 .. region.size()) with tensor `name`'s `state` over `region` (global coordinates
  // of the tensor viewed as a matrix). Every element must be covered by some chunk.
  Status Read(const std::string& name, StateKind state, const Region& region, float* dst);
  // Reads every chunk and checks every checksum and that each tensor is covered exactly once.
  Status VerifyAll();
  // The metadata entry of (name, state), or null.
  const proto::TensorEntry* Find(const std::string& name, StateKind state) const;

  uint64_t bytes_read() const { return bytes_read_; }

  // The byte ranges Read(name, state, region) reads, in the order it reads them, appended to
  // `out` (nothing for a tensor that is not in the checkpoint).
  void PlanReads(const std::string& name, StateKind state, const Region& region,
                 std::vector<FileRange>* out);
  // Takes the bytes of every read from `stream` (not owned; nullptr to read the files again),
  // which must have been planned with PlanReads for the Read calls that follow, in their order.
  void SetStream(DirectStream* stream) { stream_ = stream; }

 private:
  struct ChunkRef {
    const proto::Chunk* chunk;
    Region region;
    int index;
  };
  struct Entry {
    const proto::TensorEntry* tensor;
    std::vector<ChunkRef> chunks;
  };
  CheckpointReader() = default;
  static Status CheckCoverage(const std::string& where, const Entry& e);
  // The index of every tensor's chunks, coverage checked (Open, OpenFrom).
  Status Index(const std::string& meta_path);
  Result<int> Fd(const std::string& file);
  // How Read reads chunk `c` for `region` (the runs to copy are left in segs_): false when they
  // do not intersect; else whole (in place) or blocks [*first, *last].
  bool PlanChunk(const ChunkRef& c, const Region& region, bool* whole, uint64_t* first,
                 uint64_t* last);
  // n bytes of `file` at `offset`: from the stream if one is set, else pread.
  Status Fetch(const std::string& file, char* dst, uint64_t n, uint64_t offset,
               const std::string& where);
  // Reads blocks [first, last] of chunk `c` into buf (chunk-relative, from block `first`) and
  // checks their CRCs.
  Status ReadBlocks(const Entry& e, const ChunkRef& c, uint64_t first, uint64_t last,
                    std::vector<char>* buf);
  // Reads all of chunk `c` straight into dst (its region is exactly the one asked for).
  Status ReadWhole(const Entry& e, const ChunkRef& c, char* dst);
  std::string Where(const Entry& e, const ChunkRef& c) const;

  std::string dir_;
  proto::CheckpointMetadata meta_;
  std::map<std::pair<std::string, std::string>, Entry> index_;
  std::map<std::string, int> fds_;
  DirectStream* stream_ = nullptr;
  ByteSource* source_ = nullptr;  // OpenFrom's: every read
  uint64_t bytes_read_ = 0;
  std::vector<CopySegment> segs_;  // scratch of Read, kept to avoid reallocation
  std::vector<char> buf_;
};

// The metadata region of chunk `c` of a tensor with `dims` dimensions as a matrix Region.
Region ChunkRegion(const proto::Chunk& c, int dims);

}  // namespace loom
