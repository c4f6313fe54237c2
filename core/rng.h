// Counter-based random numbers: every value is a pure function of (seed, stream, index), so any
// shard of a tensor can be initialised on its own and still equal the same slice of a
// single-process initialisation, whatever the parallel layout.
#pragma once

#include <cmath>
#include <cstdint>

namespace loom {

// SplitMix64 finaliser: a fast, well-mixed 64-bit hash.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t HashCombine(uint64_t a, uint64_t b) {
  return Mix64(a ^ Mix64(b));
}

// Uniform in (0, 1), 53 random bits.
inline double UniformAt(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t r = Mix64(HashCombine(HashCombine(seed, stream), index));
  return (static_cast<double>(r >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Standard normal (Box-Muller on two counter-derived uniforms).
inline double NormalAt(uint64_t seed, uint64_t stream, uint64_t index) {
  double u1 = UniformAt(seed, stream, 2 * index);
  double u2 = UniformAt(seed, stream, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// Stable 64-bit hash of a string (FNV-1a), used to derive a per-tensor stream from its name.
inline uint64_t HashString(const char* s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
  return h;
}

}  // namespace loom
