// Loom's version: `loom --version`, and recorded in every checkpoint it writes.
#pragma once

namespace loom {

inline constexpr char kLoomVersion[] = "0.1.0";

}  // namespace loom
