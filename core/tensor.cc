// Tensor storage and dtype helpers.
#include "core/tensor.h"

namespace loom {

struct Tensor::Storage {
  void* ptr = nullptr;
  size_t bytes = 0;
  MemTag tag = MemTag::kOther;
  ~Storage() { AlignedFree(ptr, bytes, tag); }
};

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kBF16:
      return 2;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
    case DType::kU16:
      return 2;
    case DType::kU32:
      return 4;
    case DType::kF16:
      return 2;
    case DType::kU8:
      return 1;
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF64:
      return "F64";
    case DType::kBF16:
      return "BF16";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
    case DType::kU16:
      return "U16";
    case DType::kU32:
      return "U32";
    case DType::kF16:
      return "F16";
    case DType::kU8:
      return "U8";
  }
  return "?";
}

Result<DType> DTypeFromName(const std::string& name) {
  for (DType d : {DType::kF32, DType::kF64, DType::kBF16, DType::kI32, DType::kI64, DType::kU16,
                  DType::kU32, DType::kF16, DType::kU8}) {
    if (name == DTypeName(d)) return d;
  }
  return InvalidArgument("unknown dtype '" + name +
                         "' (expected F32, F64, BF16, F16, I32, I64, U8, U16, U32)");
}

Result<DType> ParseFloatDType(const std::string& name, const std::string& where) {
  if (name == "f32" || name == "fp32" || name == "float32") return DType::kF32;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "f16" || name == "fp16" || name == "float16") return DType::kF16;
  return InvalidArgument(where + ": expected f32, bf16 or f16, got '" + name + "'");
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<Tensor> Tensor::Zeros(Shape shape, DType dtype, MemTag tag) {
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("negative dimension in shape " + ShapeToString(shape));
  }
  size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  void* p = AlignedAlloc(bytes, tag);
  if (p == nullptr) {
    return Internal("out of memory allocating " + std::to_string(bytes) + " bytes for " +
                    MemTagName(tag));
  }
  Tensor t;
  t.storage_ = std::make_shared<Storage>();
  t.storage_->ptr = p;
  t.storage_->bytes = bytes;
  t.storage_->tag = tag;
  t.data_ = p;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::Borrow(void* data, Shape shape, DType dtype, Device device) {
  Tensor t;
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

Result<Tensor> Tensor::View(int64_t offset, Shape shape) const {
  if (offset < 0 || offset + NumElements(shape) > numel()) {
    return InvalidArgument("view of " + ShapeToString(shape) + " at offset " +
                           std::to_string(offset) + " exceeds tensor of " + ShapeToString(shape_));
  }
  Tensor t = *this;
  t.data_ = static_cast<char*>(data_) + static_cast<size_t>(offset) * DTypeSize(dtype_);
  t.shape_ = std::move(shape);
  return t;
}

}  // namespace loom
