// PrintableUtf8: a decoder of one sequence at a time that escapes whatever it cannot accept.
#include "core/utf8.h"

#include <cstdint>

namespace loom {
namespace {

// The length of the well-formed UTF-8 sequence at s[i] (2 to 4), or 0 when there is none. The
// ranges of the second byte are those of Unicode's table 3-7: they exclude overlong forms (C0,
// C1, E0 80-9F, F0 80-8F), surrogates (ED A0-BF) and code points beyond U+10FFFF (F4 90-BF, F5+).
size_t SequenceLength(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b = at(i);
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the second byte's range
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size() || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  }
  return n;
}

bool PrintableAscii(uint8_t b) {
  return (b >= 0x20 && b < 0x7F) || b == '\n' || b == '\t';
}

}  // namespace

std::string PrintableUtf8(std::string_view raw) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size();) {
    const uint8_t b = static_cast<uint8_t>(raw[i]);
    if (PrintableAscii(b)) {
      out += static_cast<char>(b);
      ++i;
    } else if (const size_t n = SequenceLength(raw, i); n > 0) {
      out.append(raw.substr(i, n));
      i += n;
    } else {
      // One byte at a time: the bytes after a broken lead byte are looked at afresh, so a valid
      // sequence right after a truncated one is kept.
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xF];
      ++i;
    }
  }
  return out;
}

}  // namespace loom
