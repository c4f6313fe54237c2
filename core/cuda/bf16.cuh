// Internal to core/cuda/: bfloat16 bit conversions in device code, bit for bit those of
// core/half.h (round to nearest, ties to even; a NaN stays a quiet NaN with its sign and upper
// payload; an overflow rounds to inf), so a bf16 tensor made on the GPU equals one made on the CPU.
// Integer arithmetic on the bits, so neither flush-to-zero nor the rounding mode matter.
#pragma once

#include <cstdint>

namespace loom::cuda::internal {

__device__ __forceinline__ uint16_t FloatToBf16Bits(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);
}

__device__ __forceinline__ float Bf16BitsToFloat(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

}  // namespace loom::cuda::internal
