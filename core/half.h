// 16-bit floating-point elements stored as uint16_t: bfloat16 (the upper half of an IEEE float)
// and IEEE binary16. Conversions to float are exact; conversions from float round to nearest,
// ties to even, as hardware does, so a reduction computed here matches one computed by a device.
#pragma once

#include <cstdint>
#include <cstring>

namespace loom {

inline float Bf16ToFloat(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  // A NaN stays a (quiet) NaN: rounding could carry its payload into the exponent and make it inf.
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t lsb = (u >> 16) & 1u;                      // ties go to the even neighbour
  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);  // an overflow rounds to inf
}

// GCC and Clang provide _Float16 on x86-64 (F16C instructions or a software routine); its
// conversions are IEEE's.
inline float F16ToFloat(uint16_t h) {
  _Float16 x;
  std::memcpy(&x, &h, sizeof(x));
  return static_cast<float>(x);
}

inline uint16_t FloatToF16(float f) {
  const _Float16 x = static_cast<_Float16>(f);
  uint16_t h;
  std::memcpy(&h, &x, sizeof(h));
  return h;
}

}  // namespace loom
