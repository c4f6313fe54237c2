// Host reductions over every dtype communicators carry.
#include "comm/reduce.h"

#include <algorithm>
#include <type_traits>

#include "core/half.h"

namespace loom {
namespace {

template <class T>
void Combine(T* dst, const T* src, int64_t n, ReduceOp op) {
  if (op == ReduceOp::kSum) {
    // Integers wrap around (as MPI's sums do), through a wider type: no signed overflow.
    using Wide = std::conditional_t<std::is_integral_v<T>, int64_t, T>;
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(Wide(dst[i]) + Wide(src[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = std::max(dst[i], src[i]);
  }
}

// 16-bit floats, through float.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void Combine16(uint16_t* dst, const uint16_t* src, int64_t n, ReduceOp op) {
  for (int64_t i = 0; i < n; ++i) {
    const float a = ToFloat(dst[i]), b = ToFloat(src[i]);
    dst[i] = FromFloat(op == ReduceOp::kSum ? a + b : std::max(a, b));
  }
}

}  // namespace

void ReduceInto(void* dst, const void* src, int64_t n, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kF32:
      return Combine(static_cast<float*>(dst), static_cast<const float*>(src), n, op);
    case DType::kI32:
      return Combine(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), n, op);
    case DType::kU8:
      return Combine(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n, op);
    case DType::kBF16:
      return Combine16<Bf16ToFloat, FloatToBf16>(static_cast<uint16_t*>(dst),
                                                 static_cast<const uint16_t*>(src), n, op);
    case DType::kF16:
      return Combine16<F16ToFloat, FloatToF16>(static_cast<uint16_t*>(dst),
                                               static_cast<const uint16_t*>(src), n, op);
    default:
      return;  // not carried: refused when the call was issued
  }
}

}  // namespace loom
