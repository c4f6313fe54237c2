// Token files: the on-disk form of a tokenised corpus (documented in docs/DATA.md).
//
//   offset  size  field
//   0       8     magic "LOOMTOK\0"
//   8       4     version (u32, = 1)
//   12      4     bytes per token (u32: 2 = uint16, 4 = uint32)
//   16      8     token count (u64)
//   24      8     reserved (0)
//   32      ...   tokens, little-endian, count * bytes-per-token bytes, nothing after them
//
// Reading checks every field and the exact file size; errors name the file and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace loom {

constexpr char kTokenMagic[8] = {'L', 'O', 'O', 'M', 'T', 'O', 'K', '\0'};
constexpr uint32_t kTokenVersion = 1;
constexpr size_t kTokenHeaderBytes = 32;

// Writes tokens atomically with the narrowest width that holds max(tokens) (or `bytes_per_token`
// if non-zero; it must then be 2 or 4 and wide enough).
Status WriteTokenFile(const std::string& path, const std::vector<uint32_t>& tokens,
                      uint32_t bytes_per_token = 0);

// A token file loaded into memory, widened to int32.
struct TokenData {
  std::string path;
  std::vector<int32_t> tokens;
  uint32_t bytes_per_token = 0;
};

// Loads and validates; every token must be < vocab (when vocab > 0).
Result<TokenData> ReadTokenFile(const std::string& path, int64_t vocab);

// Byte-level tokenizer (vocab 256): one token per byte of the UTF-8 text.
std::vector<uint32_t> EncodeBytes(const std::string& text);
std::string DecodeBytes(const std::vector<int32_t>& tokens);

}  // namespace loom
