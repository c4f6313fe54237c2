// A block of device memory taken from a CachingAllocator (core/caching_allocator.h) under a MemTag
// and given back to it when the DeviceBlock is destroyed. The allocator must outlive the block.
// The block is stream-ordered as the allocator's blocks are: it is used on the stream it was
// allocated for, and may be destroyed as soon as the work that uses it has been queued (the cache
// hands it out again only to later work on the same stream). Movable, not copyable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "core/caching_allocator.h"
#include "core/status.h"

namespace loom {

class DeviceBlock {
 public:
  DeviceBlock() = default;
  // Contents are undefined (the cache may hand back an old block).
  static Result<DeviceBlock> Allocate(CachingAllocator* alloc, size_t bytes, MemTag tag,
                                      CachingAllocator::Stream stream) {
    LOOM_ASSIGN_OR_RETURN(void* p, alloc->Allocate(bytes, tag, stream));
    DeviceBlock b;
    b.alloc_ = alloc;
    b.ptr_ = p;
    b.bytes_ = bytes;
    return b;
  }
  DeviceBlock(DeviceBlock&& o) noexcept
      : alloc_(std::exchange(o.alloc_, nullptr)),
        ptr_(std::exchange(o.ptr_, nullptr)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBlock& operator=(DeviceBlock&& o) noexcept {
    std::swap(alloc_, o.alloc_);
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  // Free only fails for a pointer the allocator does not know, which cannot happen here.
  ~DeviceBlock() {
    if (ptr_ != nullptr) (void)alloc_->Free(ptr_);
  }

  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }
  bool empty() const { return ptr_ == nullptr; }

 private:
  CachingAllocator* alloc_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace loom
