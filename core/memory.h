// Tagged memory accounting: every tensor allocation names what it holds, so current and peak
// bytes per category can be reported per rank (and compared with the ZeRO formulas).
// Thread-safe (atomics). Counts bytes requested, not allocator overhead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom {

enum class MemTag : int {
  kParams = 0,
  kGrads,
  kOptimizer,
  kActivations,
  kComm,
  kOther,
  kCount,
};

const char* MemTagName(MemTag tag);

struct MemUsage {
  int64_t current = 0;
  int64_t peak = 0;
};

void TrackAlloc(MemTag tag, size_t bytes);
void TrackFree(MemTag tag, size_t bytes);
MemUsage GetMemUsage(MemTag tag);
// Restarts peak tracking from the current values (e.g. after initialisation).
void ResetMemPeaks();
// "params 12.0 MiB (peak 12.0 MiB), grads ..." for logs.
std::string MemReport();

// This process's peak resident set size in bytes (VmHWM of /proc/self/status; -1 if unknown).
// Unlike getrusage's ru_maxrss it is not inherited across exec.
int64_t PeakRssBytes();

// 64-byte aligned, zero-initialised host allocation, tracked under `tag`; nullptr on failure.
void* AlignedAlloc(size_t bytes, MemTag tag);
void AlignedFree(void* ptr, size_t bytes, MemTag tag);

}  // namespace loom
