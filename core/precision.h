// The arithmetic precision a job computes in: fp32 throughout, or bf16 compute with fp32 master
// weights and optimizer state (DESIGN §5). The planner prices devices by it (their peak FLOP/s
// differ); the job file names it.
#pragma once

#include <string>

#include "core/status.h"

namespace loom {

enum class Precision { kFp32, kBf16 };
const char* PrecisionName(Precision p);                     // "fp32", "bf16"
Result<Precision> ParsePrecision(const std::string& name);  // fp32 | bf16

}  // namespace loom
