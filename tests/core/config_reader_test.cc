// YAML field reader: errors name the file, line, dotted field and what was expected.
#include "core/config_reader.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/file_util.h"

namespace loom {
namespace {

std::string Write(const char* name, const std::string& text) {
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  EXPECT_TRUE(WriteFileAtomic(path, text).ok());
  return path;
}

TEST(ConfigSection, ReadsTypedFields) {
  auto path = Write("loom_cfg_ok.yaml", "a: 3\nb: 0.5\nsub:\n  s: hello\n  f: true\n");
  auto root = ConfigSection::LoadFile(path);
  ASSERT_TRUE(root.ok());
  int64_t a = 0;
  double b = 0;
  ASSERT_TRUE(root->Int("a", &a, true, 0, 10).ok());
  ASSERT_TRUE(root->Double("b", &b, true, 0, 1).ok());
  auto sub = root->Section("sub", true);
  ASSERT_TRUE(sub.ok());
  std::string s;
  bool f = false;
  ASSERT_TRUE(sub->String("s", &s, true).ok());
  ASSERT_TRUE(sub->Bool("f", &f, true).ok());
  EXPECT_TRUE(sub->Finish().ok());
  EXPECT_TRUE(root->Finish().ok());
  EXPECT_EQ(a, 3);
  EXPECT_EQ(s, "hello");
  EXPECT_TRUE(f);
}

TEST(ConfigSection, ErrorsNameFileLineFieldAndExpectation) {
  auto path = Write("loom_cfg_bad.yaml", "model:\n  layers: many\n  extra: 1\n");
  auto root = ConfigSection::LoadFile(path);
  ASSERT_TRUE(root.ok());
  auto model = root->Section("model", true);
  ASSERT_TRUE(model.ok());
  int64_t layers = 0;
  Status s = model->Int("layers", &layers, true, 1, 100);
  EXPECT_NE(s.message().find(
                path + ":2: field 'model.layers': expected an integer in [1, 100], got 'many'"),
            std::string::npos)
      << s.message();
  Status missing = model->Int("heads", &layers, true, 1, 100);
  EXPECT_NE(missing.message().find("field 'model.heads': missing"), std::string::npos);
  Status unknown = model->Finish();
  EXPECT_NE(unknown.message().find(":3: field 'model.extra': unknown field"), std::string::npos)
      << unknown.message();
}

TEST(ConfigSection, SyntaxAndMissingFile) {
  auto path = Write("loom_cfg_syntax.yaml", "a: [1, 2\n");
  auto r = ConfigSection::LoadFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("YAML syntax error"), std::string::npos);
  EXPECT_EQ(ConfigSection::LoadFile("/nonexistent/x.yaml").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace loom
