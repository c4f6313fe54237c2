// Typed buffers of communication calls: where the elements are (an address on a device), how
// many there are and of which type. A buffer does not own its memory: the caller keeps it valid,
// and does not touch it, until the call's handle completes (communicator.h says what happens
// after a deadline). Communicators carry f32, bf16, f16, i32 and u8 elements.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace loom {

// True for the element types a communicator carries: F32, BF16, F16, I32, U8.
bool CommSupports(DType dtype);
// "cpu", "cuda".
const char* DeviceName(Device device);

// Elements a call writes (or reads and writes).
struct CommBuffer {
  void* data = nullptr;
  int64_t count = 0;  // elements
  DType dtype = DType::kF32;
  Device device = Device::kCpu;

  int64_t bytes() const { return count * static_cast<int64_t>(DTypeSize(dtype)); }

  // Host memory whose element type is T's (float, int32_t, uint8_t). bf16 and f16 elements
  // are uint16_t in C++: name their dtype, CommBuffer{data, count, DType::kBF16}.
  template <class T>
  static CommBuffer Host(T* data, int64_t count) {
    return {data, count, DTypeOf<T>(), Device::kCpu};
  }
  // The whole of `t` (its storage must stay alive as above).
  static CommBuffer Of(const Tensor& t) { return {t.raw(), t.numel(), t.dtype(), t.device()}; }
};

// Elements a call only reads.
struct ConstCommBuffer {
  const void* data = nullptr;
  int64_t count = 0;  // elements
  DType dtype = DType::kF32;
  Device device = Device::kCpu;

  ConstCommBuffer() = default;
  ConstCommBuffer(const void* d, int64_t n, DType t, Device dev = Device::kCpu)
      : data(d), count(n), dtype(t), device(dev) {}
  ConstCommBuffer(const CommBuffer& b)  // NOLINT: implicit by design, a writable buffer reads too
      : data(b.data), count(b.count), dtype(b.dtype), device(b.device) {}

  int64_t bytes() const { return count * static_cast<int64_t>(DTypeSize(dtype)); }

  template <class T>
  static ConstCommBuffer Host(const T* data, int64_t count) {
    return {data, count, DTypeOf<T>(), Device::kCpu};
  }
  static ConstCommBuffer Of(const Tensor& t) { return {t.raw(), t.numel(), t.dtype(), t.device()}; }
};

}  // namespace loom
