// Token file format: round trip in both widths, and clear errors for every corrupt field.
#include "worker/data/token_file.h"

#include <gtest/gtest.h>

#include "core/file_util.h"
#include "tests/temp_dir.h"

namespace loom {
namespace {

std::string Temp(const char* name) {
  return testing::TestTempPath(name);
}

TEST(TokenFile, RoundTripBothWidths) {
  const std::string path = Temp("loom_tok_rt.bin");
  std::vector<uint32_t> small{0, 1, 255, 65535};
  ASSERT_TRUE(WriteTokenFile(path, small).ok());
  auto r = ReadTokenFile(path, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bytes_per_token, 2u);
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{0, 1, 255, 65535}));
  std::vector<uint32_t> big{70000, 3};
  ASSERT_TRUE(WriteTokenFile(path, big).ok());
  r = ReadTokenFile(path, 100000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bytes_per_token, 4u);
  EXPECT_EQ(r->tokens[0], 70000);
  EXPECT_FALSE(WriteTokenFile(path, big, 2).ok());  // too narrow
}

TEST(TokenFile, CorruptFieldsAreNamed) {
  const std::string path = Temp("loom_tok_bad.bin");
  ASSERT_TRUE(WriteTokenFile(path, {1, 2, 3, 300}).ok());
  const std::string good = *ReadFile(path);
  auto expect_error = [&](std::string bytes, int64_t vocab, const std::string& field) {
    ASSERT_TRUE(WriteFileAtomic(path, bytes).ok());
    auto r = ReadTokenFile(path, vocab);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_NE(r.status().message().find("'" + path + "': " + field), std::string::npos)
        << r.status().message();
  };
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  expect_error(bad_magic, 0, "magic");
  std::string bad_version = good;
  bad_version[8] = 9;
  expect_error(bad_version, 0, "version");
  std::string bad_width = good;
  bad_width[12] = 3;
  expect_error(bad_width, 0, "bytes_per_token");
  expect_error(good.substr(0, good.size() - 1), 0, "count");
  expect_error(good.substr(0, 10), 0, "header");
  expect_error(good, 256, "tokens");  // 300 is outside a 256 vocabulary
}

TEST(ByteTokenizer, RoundTrip) {
  const std::string text = "Hello, wörld\n";
  auto tokens = EncodeBytes(text);
  EXPECT_EQ(tokens.size(), text.size());
  std::vector<int32_t> ids(tokens.begin(), tokens.end());
  EXPECT_EQ(DecodeBytes(ids), text);
}

}  // namespace
}  // namespace loom
