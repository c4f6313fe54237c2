#include "core/precision.h"

namespace loom {

const char* PrecisionName(Precision p) {
  return p == Precision::kBf16 ? "bf16" : "fp32";
}

Result<Precision> ParsePrecision(const std::string& name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  return InvalidArgument("expected fp32 or bf16, got '" + name + "'");
}

}  // namespace loom
