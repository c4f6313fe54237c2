// A caching allocator with memory accounting by category, as a GPU rank needs: cudaMalloc and
// cudaFree synchronise the device and are slow, so freed blocks are kept and handed out again,
// and every block names what it holds (core/memory.h's MemTag: parameters, gradients, optimizer
// state, activations, communication buffers), so that what a run uses can be set beside the
// planner's memory model category by category.
//
// The policy is pure (this file): the memory itself comes from a RawMemory, device memory in a
// GPU build (core/cuda/device_memory.h) or host memory (HostMemory below: what the CPU tests use,
// and a pool for staging buffers).
//
// Blocks: sizes are rounded up to 512 bytes; a request takes the smallest cached block of the
// same stream whose size is at least the request and at most twice it (a block is never split,
// so a small request does not pin a large one), else new memory. Stream-ordered reuse: a block
// freed on stream S is handed out again only to work on S, which runs after everything queued on
// S before (the PyTorch rule); a block used on other streams must be freed only once they are done
// with it. When the raw allocator fails, the cache is returned to it and the request retried
// once; the error then says how much was asked for and what is in use per category.
//
// Thread-safe (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/memory.h"
#include "core/status.h"

namespace loom {

// Where blocks come from. Malloc returns an error (never throws) when memory is exhausted.
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  virtual Result<void*> Malloc(size_t bytes) = 0;
  virtual void Free(void* ptr, size_t bytes) = 0;
  virtual const char* name() const = 0;  // "cuda device 0", "host"
};

// 64-byte aligned host memory (core/memory.h AlignedAlloc under MemTag::kOther), with an optional
// capacity: Malloc fails once `capacity` bytes are out (0: no limit), as a device would.
class HostMemory : public RawMemory {
 public:
  explicit HostMemory(size_t capacity = 0) : capacity_(capacity) {}
  Result<void*> Malloc(size_t bytes) override;
  void Free(void* ptr, size_t bytes) override;
  const char* name() const override { return "host"; }

 private:
  const size_t capacity_;
  size_t out_ = 0;  // GUARDED_BY(mu_)
  std::mutex mu_;
};

class CachingAllocator {
 public:
  // An opaque stream identity (a cudaStream_t's value; 0: the default stream).
  using Stream = uintptr_t;

  explicit CachingAllocator(RawMemory* raw) : raw_(raw) {}
  // Returns every block to the raw allocator; blocks still allocated are leaked to it as they are
  // (their owners outlived the allocator) and counted in the log line the destructor writes.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` (> 0) for work on `stream`, accounted under `tag`.
  Result<void*> Allocate(size_t bytes, MemTag tag, Stream stream = 0);
  // Back to the cache. InvalidArgument for a pointer this allocator did not hand out (or freed
  // twice).
  Status Free(void* ptr);
  // Returns the cached (free) blocks to the raw allocator.
  void EmptyCache();

  // Bytes requested and still allocated under `tag`, and their peak.
  MemUsage usage(MemTag tag) const;
  int64_t reserved_bytes() const;  // taken from the raw allocator (allocated + cached blocks)
  int64_t cached_bytes() const;    // free blocks kept for reuse
  int64_t raw_mallocs() const;     // raw Malloc calls so far (how often the cache missed)
  // "params 1.0 MiB (peak 1.0 MiB), ...; reserved 4.0 MiB (cached 2.0 MiB) on cuda device 0".
  std::string Report() const;

  static size_t RoundUp(size_t bytes) { return (bytes + 511) / 512 * 512; }

 private:
  struct Block {
    size_t size = 0;       // of the block (rounded)
    size_t requested = 0;  // what the caller asked for (accounted)
    MemTag tag = MemTag::kOther;
    Stream stream = 0;
  };
  void EmptyCacheLocked();
  std::string ReportLocked() const;

  RawMemory* const raw_;
  mutable std::mutex mu_;
  std::unordered_map<void*, Block> allocated_;                 // GUARDED_BY(mu_)
  std::map<Stream, std::multimap<size_t, void*>> cached_;      // GUARDED_BY(mu_): by stream, size
  MemUsage usage_[static_cast<int>(MemTag::kCount)];           // GUARDED_BY(mu_)
  int64_t reserved_ = 0, cached_total_ = 0, raw_mallocs_ = 0;  // GUARDED_BY(mu_)
};

}  // namespace loom
