// Tagged allocation counters.
#include "core/memory.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace loom {
namespace {

constexpr int kNumTags = static_cast<int>(MemTag::kCount);
std::atomic<int64_t> g_current[kNumTags];
std::atomic<int64_t> g_peak[kNumTags];

}  // namespace

const char* MemTagName(MemTag tag) {
  switch (tag) {
    case MemTag::kParams:
      return "params";
    case MemTag::kGrads:
      return "grads";
    case MemTag::kOptimizer:
      return "optimizer";
    case MemTag::kActivations:
      return "activations";
    case MemTag::kComm:
      return "comm";
    case MemTag::kOther:
      return "other";
    case MemTag::kCount:
      break;
  }
  return "?";
}

void TrackAlloc(MemTag tag, size_t bytes) {
  int i = static_cast<int>(tag);
  int64_t now = g_current[i].fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
  int64_t peak = g_peak[i].load();
  while (now > peak && !g_peak[i].compare_exchange_weak(peak, now)) {
  }
}

void TrackFree(MemTag tag, size_t bytes) {
  g_current[static_cast<int>(tag)].fetch_sub(static_cast<int64_t>(bytes));
}

MemUsage GetMemUsage(MemTag tag) {
  int i = static_cast<int>(tag);
  return {g_current[i].load(), g_peak[i].load()};
}

void ResetMemPeaks() {
  for (int i = 0; i < kNumTags; ++i) g_peak[i] = g_current[i].load();
}

std::string MemReport() {
  std::string out;
  char buf[128];
  for (int i = 0; i < kNumTags; ++i) {
    MemUsage u = GetMemUsage(static_cast<MemTag>(i));
    std::snprintf(buf, sizeof(buf), "%s%s %.1f MiB (peak %.1f)", i ? ", " : "",
                  MemTagName(static_cast<MemTag>(i)), u.current / 1048576.0, u.peak / 1048576.0);
    out += buf;
  }
  return out;
}

void* AlignedAlloc(size_t bytes, MemTag tag) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr) return nullptr;
  std::memset(p, 0, rounded);
  TrackAlloc(tag, bytes);
  return p;
}

void AlignedFree(void* ptr, size_t bytes, MemTag tag) {
  if (ptr == nullptr) return;
  std::free(ptr);
  TrackFree(tag, bytes);
}

int64_t PeakRssBytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long long kb = -1;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "VmHWM: %lld kB", &kb) == 1) break;
  }
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

}  // namespace loom
