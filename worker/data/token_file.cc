// Token file reader/writer and the byte-level tokenizer.
#include "worker/data/token_file.h"

#include <algorithm>
#include <cstring>

#include "core/file_util.h"

namespace loom {

Status WriteTokenFile(const std::string& path, const std::vector<uint32_t>& tokens,
                      uint32_t bytes_per_token) {
  uint32_t max_token = tokens.empty() ? 0 : *std::max_element(tokens.begin(), tokens.end());
  uint32_t needed = max_token <= 0xFFFF ? 2 : 4;
  if (bytes_per_token == 0) bytes_per_token = needed;
  if ((bytes_per_token != 2 && bytes_per_token != 4) || bytes_per_token < needed) {
    return InvalidArgument("token file '" + path + "': bytes per token " +
                           std::to_string(bytes_per_token) + " cannot hold token " +
                           std::to_string(max_token) + " (expected 2 or 4)");
  }
  std::string out(kTokenHeaderBytes + tokens.size() * bytes_per_token, '\0');
  std::memcpy(out.data(), kTokenMagic, 8);
  uint64_t count = tokens.size();
  std::memcpy(out.data() + 8, &kTokenVersion, 4);
  std::memcpy(out.data() + 12, &bytes_per_token, 4);
  std::memcpy(out.data() + 16, &count, 8);
  char* p = out.data() + kTokenHeaderBytes;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (bytes_per_token == 2) {
      uint16_t v = static_cast<uint16_t>(tokens[i]);
      std::memcpy(p + 2 * i, &v, 2);
    } else {
      std::memcpy(p + 4 * i, &tokens[i], 4);
    }
  }
  return WriteFileAtomic(path, out);
}

Result<TokenData> ReadTokenFile(const std::string& path, int64_t vocab) {
  LOOM_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  auto bad = [&](const std::string& field, const std::string& what) {
    return InvalidArgument("token file '" + path + "': " + field + ": " + what);
  };
  if (bytes.size() < kTokenHeaderBytes) {
    return bad("header",
               "file is " + std::to_string(bytes.size()) + " bytes, expected at least 32");
  }
  if (std::memcmp(bytes.data(), kTokenMagic, 8) != 0) {
    return bad("magic", "expected \"LOOMTOK\\0\" (is this a token file from 'loom data prepare'?)");
  }
  uint32_t version, width;
  uint64_t count;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&width, bytes.data() + 12, 4);
  std::memcpy(&count, bytes.data() + 16, 8);
  if (version != kTokenVersion) {
    return bad("version", std::to_string(version) + ", expected " + std::to_string(kTokenVersion));
  }
  if (width != 2 && width != 4) {
    return bad("bytes_per_token", std::to_string(width) + ", expected 2 or 4");
  }
  if (count > (bytes.size() - kTokenHeaderBytes) / width ||
      kTokenHeaderBytes + count * width != bytes.size()) {
    return bad("count", std::to_string(count) + " tokens of " + std::to_string(width) +
                            " bytes do not match the file size " + std::to_string(bytes.size()) +
                            " (truncated or corrupt)");
  }
  TokenData data{path, std::vector<int32_t>(count), width};
  const char* p = bytes.data() + kTokenHeaderBytes;
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t v = 0;
    if (width == 2) {
      uint16_t s;
      std::memcpy(&s, p + 2 * i, 2);
      v = s;
    } else {
      std::memcpy(&v, p + 4 * i, 4);
    }
    if (vocab > 0 && v >= static_cast<uint64_t>(vocab)) {
      return bad("tokens", "token " + std::to_string(v) + " at index " + std::to_string(i) +
                               " is outside the model vocabulary [0, " + std::to_string(vocab) +
                               ")");
    }
    data.tokens[i] = static_cast<int32_t>(v);
  }
  return data;
}

std::vector<uint32_t> EncodeBytes(const std::string& text) {
  std::vector<uint32_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

std::string DecodeBytes(const std::vector<int32_t>& tokens) {
  std::string out;
  out.reserve(tokens.size());
  for (int32_t t : tokens) out.push_back(static_cast<char>(t & 0xFF));
  return out;
}

}  // namespace loom
