// Tensor: a shape, a dtype, a device and storage that is either owned (64-byte aligned, tagged
// for memory accounting, freed with the last reference) or borrowed (the caller keeps it alive).
// Views share the owner's storage. Not thread-safe for concurrent mutation of the same data;
// copying a Tensor copies the handle, not the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/memory.h"
#include "core/status.h"

namespace loom {

enum class DType { kF32, kF64, kBF16, kI32, kI64, kU16, kU32, kF16, kU8 };
enum class Device { kCpu, kCuda };

size_t DTypeSize(DType dtype);
// Safetensors spelling: "F32", "F64", "BF16", "I32", "I64", "U16", "U32", "F16", "U8".
const char* DTypeName(DType dtype);
Result<DType> DTypeFromName(const std::string& name);
// A floating-point storage type as users name it: "f32" / "bf16" / "f16" (also "fp32",
// "float32", "bfloat16", "fp16", "float16") -> kF32 / kBF16 / kF16; anything else: an error
// naming `where` (a flag or a job file's field).
Result<DType> ParseFloatDType(const std::string& name, const std::string& where);

using Shape = std::vector<int64_t>;
int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);

template <typename T>
constexpr DType DTypeOf();
template <>
constexpr DType DTypeOf<float>() {
  return DType::kF32;
}
template <>
constexpr DType DTypeOf<double>() {
  return DType::kF64;
}
template <>
constexpr DType DTypeOf<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType DTypeOf<int64_t>() {
  return DType::kI64;
}
template <>
constexpr DType DTypeOf<uint16_t>() {
  return DType::kU16;
}
template <>
constexpr DType DTypeOf<uint32_t>() {
  return DType::kU32;
}
template <>
constexpr DType DTypeOf<uint8_t>() {
  return DType::kU8;
}

class Tensor {
 public:
  Tensor() = default;

  // Owned, zero-filled CPU tensor. Fails only when memory is exhausted.
  static Result<Tensor> Zeros(Shape shape, DType dtype, MemTag tag);
  // Borrowed: `data` must outlive every handle and view of the result.
  static Tensor Borrow(void* data, Shape shape, DType dtype, Device device = Device::kCpu);

  // A view of `shape` starting `offset` elements into this tensor's data (shares storage).
  Result<Tensor> View(int64_t offset, Shape shape) const;

  bool defined() const { return data_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[static_cast<size_t>(i < 0 ? i + rank() : i)]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int64_t numel() const { return NumElements(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }
  bool owned() const { return storage_ != nullptr; }

  void* raw() const { return data_; }
  // Typed access; the dtype must match (checked in debug builds).
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_);
  }

 private:
  struct Storage;
  std::shared_ptr<Storage> storage_;  // null for borrowed tensors
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
};

}  // namespace loom
