// PrintableUtf8: valid text kept byte for byte, every rejected byte escaped as \xNN, and the
// result valid UTF-8 whatever the input (checked against an independent decoder on every
// one- and two-byte input and on random bytes).
#include "core/utf8.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

namespace loom {
namespace {

// Valid UTF-8 by the definition (decode, then check the code point's range and shortest form),
// written apart from the table of second-byte ranges the implementation uses.
bool IsValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const uint8_t c = static_cast<uint8_t>(s[i + k]);
      if ((c >> 6) != 2) return false;
      cp = cp << 6 | (c & 0x3F);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

TEST(PrintableUtf8, KeepsValidText) {
  const std::string text =
      "plain ASCII, tab\tand newline\n; é ß € 中文 😀 U+10FFFF \xF4\x8F\xBF\xBF";
  EXPECT_EQ(PrintableUtf8(text), text);
  EXPECT_EQ(PrintableUtf8(""), "");
  EXPECT_EQ(PrintableUtf8("back\\slash \\x41"), "back\\slash \\x41");  // not escaped
}

TEST(PrintableUtf8, EscapesInvalidBytesOneAtATime) {
  EXPECT_EQ(PrintableUtf8("a\x80z"), "a\\x80z");       // lone continuation byte
  EXPECT_EQ(PrintableUtf8("\xE2\x82"), "\\xe2\\x82");  // € cut after two of its bytes
  EXPECT_EQ(PrintableUtf8("\xE2\x82\xE2\x82\xAC"), "\\xe2\\x82€");  // then a whole one: kept
  EXPECT_EQ(PrintableUtf8("\xC3"), "\\xc3");                        // truncated at the end
  EXPECT_EQ(PrintableUtf8("\xFF\xFE"), "\\xff\\xfe");               // never in UTF-8
}

TEST(PrintableUtf8, EscapesWhatUnicodeForbids) {
  EXPECT_EQ(PrintableUtf8("\xC0\xAF"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(PrintableUtf8("\xE0\x80\xAF"), "\\xe0\\x80\\xaf");           // overlong, 3 bytes
  EXPECT_EQ(PrintableUtf8("\xED\xA0\x80"), "\\xed\\xa0\\x80");           // surrogate U+D800
  EXPECT_EQ(PrintableUtf8("\xF4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // U+110000
  EXPECT_EQ(PrintableUtf8("\xED\x9F\xBF"), "\xED\x9F\xBF");              // U+D7FF, just below: kept
}

TEST(PrintableUtf8, EscapesControlCharactersButNewlineAndTab) {
  EXPECT_EQ(PrintableUtf8(std::string("a\0b", 3)), "a\\x00b");  // NUL would end a C string
  EXPECT_EQ(PrintableUtf8("\x1b[2J\r\x7f"), "\\x1b[2J\\x0d\\x7f");
  EXPECT_EQ(PrintableUtf8("\n\t"), "\n\t");
}

TEST(PrintableUtf8, AlwaysValid) {
  for (int a = 0; a < 256; ++a) {
    for (int b = -1; b < 256; ++b) {
      std::string s(1, static_cast<char>(a));
      if (b >= 0) s += static_cast<char>(b);
      const std::string out = PrintableUtf8(s);
      ASSERT_TRUE(IsValidUtf8(out)) << a << " " << b;
      // Valid input without control characters comes back unchanged.
      if (IsValidUtf8(s) && a >= 0x20 && a != 0x7F && (b < 0 || (b >= 0x20 && b != 0x7F))) {
        ASSERT_EQ(out, s) << a << " " << b;
      }
    }
  }
  std::mt19937 rng(7);
  for (int t = 0; t < 1000; ++t) {
    std::string s(64, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    const std::string out = PrintableUtf8(s);
    ASSERT_TRUE(IsValidUtf8(out));
    ASSERT_GE(out.size(), s.size());
  }
}

}  // namespace
}  // namespace loom
