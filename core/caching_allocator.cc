// The caching allocator's bookkeeping, and host memory as a raw allocator.
#include "core/caching_allocator.h"

#include <cstdio>

#include "core/logging.h"

namespace loom {

Result<void*> HostMemory::Malloc(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (capacity_ != 0 && out_ + bytes > capacity_) {
      return Internal("host memory pool: " + std::to_string(bytes) + " bytes requested, " +
                      std::to_string(capacity_ - out_) + " of " + std::to_string(capacity_) +
                      " left");
    }
    out_ += bytes;
  }
  void* p = AlignedAlloc(bytes, MemTag::kOther);
  if (p == nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    out_ -= bytes;
    return Internal("host memory: cannot allocate " + std::to_string(bytes) + " bytes");
  }
  return p;
}

void HostMemory::Free(void* ptr, size_t bytes) {
  AlignedFree(ptr, bytes, MemTag::kOther);
  std::lock_guard<std::mutex> lock(mu_);
  out_ -= bytes;
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  EmptyCacheLocked();
  if (!allocated_.empty()) {
    LOOM_LOG(WARN, CORE) << "caching allocator on " << raw_->name() << " destroyed with "
                         << allocated_.size() << " blocks still allocated (left to their owners)";
  }
}

Result<void*> CachingAllocator::Allocate(size_t bytes, MemTag tag, Stream stream) {
  if (bytes == 0) return InvalidArgument("CachingAllocator::Allocate: 0 bytes");
  const size_t size = RoundUp(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  void* ptr = nullptr;
  size_t got = size;
  auto s = cached_.find(stream);
  if (s != cached_.end()) {
    auto it = s->second.lower_bound(size);  // the smallest block that fits
    if (it != s->second.end() && it->first <= 2 * size) {
      got = it->first;
      ptr = it->second;
      s->second.erase(it);
      cached_total_ -= static_cast<int64_t>(got);
    }
  }
  if (ptr == nullptr) {
    Result<void*> fresh = raw_->Malloc(size);
    if (!fresh.ok()) {
      EmptyCacheLocked();  // other streams' and sizes' blocks back to the raw allocator, retry
      fresh = raw_->Malloc(size);
    }
    if (!fresh.ok()) {
      return Internal(std::string(MemTagName(tag)) + ": cannot allocate " + std::to_string(bytes) +
                      " bytes on " + raw_->name() + " (" + fresh.status().message() +
                      "); in use: " + ReportLocked());
    }
    ptr = *fresh;
    ++raw_mallocs_;
    reserved_ += static_cast<int64_t>(size);
  }
  allocated_[ptr] = Block{got, bytes, tag, stream};
  MemUsage& u = usage_[static_cast<int>(tag)];
  u.current += static_cast<int64_t>(bytes);
  if (u.current > u.peak) u.peak = u.current;
  return ptr;
}

Status CachingAllocator::Free(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(ptr);
  if (it == allocated_.end()) {
    return InvalidArgument("CachingAllocator::Free: a pointer not allocated here (or freed twice)");
  }
  const Block b = it->second;
  allocated_.erase(it);
  usage_[static_cast<int>(b.tag)].current -= static_cast<int64_t>(b.requested);
  cached_[b.stream].emplace(b.size, ptr);
  cached_total_ += static_cast<int64_t>(b.size);
  return Status::Ok();
}

void CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  EmptyCacheLocked();
}

void CachingAllocator::EmptyCacheLocked() {
  for (auto& [stream, blocks] : cached_) {
    for (auto& [size, ptr] : blocks) {
      raw_->Free(ptr, size);
      reserved_ -= static_cast<int64_t>(size);
    }
  }
  cached_.clear();
  cached_total_ = 0;
}

MemUsage CachingAllocator::usage(MemTag tag) const {
  std::lock_guard<std::mutex> lock(mu_);
  return usage_[static_cast<int>(tag)];
}

int64_t CachingAllocator::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}

int64_t CachingAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_total_;
}

int64_t CachingAllocator::raw_mallocs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return raw_mallocs_;
}

std::string CachingAllocator::Report() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ReportLocked();
}

std::string CachingAllocator::ReportLocked() const {
  auto mib = [](int64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(b) / 1048576.0);
    return std::string(buf);
  };
  std::string out;
  for (int t = 0; t < static_cast<int>(MemTag::kCount); ++t) {
    if (!out.empty()) out += ", ";
    out += std::string(MemTagName(static_cast<MemTag>(t))) + " " + mib(usage_[t].current) +
           " (peak " + mib(usage_[t].peak) + ")";
  }
  return out + "; reserved " + mib(reserved_) + " (cached " + mib(cached_total_) + ") on " +
         raw_->name();
}

}  // namespace loom
