#include "core/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>

namespace loom {

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  // ISA-L's crc32_iscsi takes an int length and its own (inverted) seed convention.
  uint32_t c = ~crc;
  while (n > 0) {
    const size_t step = std::min<size_t>(n, 1u << 30);
    c = crc32_iscsi(const_cast<unsigned char*>(p), static_cast<int>(step), c);
    p += step;
    n -= step;
  }
  return ~c;
}

}  // namespace loom
