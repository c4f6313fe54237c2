// YAML field reader: errors name the file, line, dotted field and what was expected.
#include "core/config_reader.h"

#include <gtest/gtest.h>

#include "core/file_util.h"
#include "tests/temp_dir.h"

namespace loom {
namespace {

std::string Write(const char* name, const std::string& text) {
  std::string path = testing::TestTempPath(name);
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
  // A field missing from a block is placed at the block's key, not at its first child.
  EXPECT_NE(missing.message().find(path + ":1: field 'model.heads': missing"), std::string::npos)
      << missing.message();
  // A block given where a scalar belongs is placed at its key too.
  std::string name;
  Status block = root->String("model", &name, true);
  EXPECT_NE(block.message().find(path + ":1: field 'model': expected a string, got a mapping"),
            std::string::npos)
      << block.message();
  Status unknown = model->Finish();
  EXPECT_NE(unknown.message().find(":3: field 'model.extra': unknown field"), std::string::npos)
      << unknown.message();
}

// `precision:` with nothing after it must not train fp32 (the default) without a word.
TEST(ConfigSection, AFieldWithoutAValueIsRefused) {
  auto path =
      Write("loom_cfg_empty.yaml", "precision:\nlr: ~\nname: null\neval:\nhosts:\nsteps: 3\n");
  auto root = ConfigSection::LoadFile(path);
  ASSERT_TRUE(root.ok());
  std::string precision = "fp32";
  Status s = root->String("precision", &precision, false);
  EXPECT_NE(
      s.message().find(path + ":1: field 'precision': no value; expected a string (or leave the "
                              "field out for its default)"),
      std::string::npos)
      << s.message();
  EXPECT_EQ(precision, "fp32");
  double lr = 0;
  EXPECT_NE(root->Double("lr", &lr, true, 0, 1)
                .message()
                .find(":2: field 'lr': no value; expected a number"),
            std::string::npos);
  std::string name;
  EXPECT_FALSE(root->String("name", &name, false).ok());
  EXPECT_NE(root->Section("eval", false).status().message().find(":4: field 'eval': no value"),
            std::string::npos);
  std::vector<std::string> hosts;
  EXPECT_FALSE(root->StringList("hosts", &hosts, false).ok());
  int64_t steps = 0;
  EXPECT_TRUE(root->Int("steps", &steps, true, 1, 10).ok());
  EXPECT_EQ(steps, 3);
  // Absent optional fields still keep their defaults.
  EXPECT_TRUE(root->Int("absent", &steps, false, 1, 10).ok());
  EXPECT_EQ(steps, 3);
}

TEST(ConfigSection, AFieldGivenTwiceIsRefused) {
  // yaml-cpp keeps both entries and a lookup finds the first: the second would be ignored.
  auto path = Write("loom_cfg_twice.yaml",
                    "steps: 5\ncheckpoint: {every: 5}\nseed: 1\ncheckpoint: {every: 9}\n");
  auto root = ConfigSection::LoadFile(path);
  ASSERT_TRUE(root.ok());
  auto ck = root->Section("checkpoint", true);
  ASSERT_TRUE(ck.ok());
  int64_t every = 0;
  ASSERT_TRUE(ck->Int("every", &every, true, 0, 100).ok());
  ASSERT_TRUE(ck->Finish().ok());
  int64_t n = 0;
  ASSERT_TRUE(root->Int("steps", &n, true, 0, 100).ok());
  ASSERT_TRUE(root->Int("seed", &n, true, 0, 100).ok());
  Status twice = root->Finish();
  EXPECT_NE(twice.message().find(
                path + ":4: field 'checkpoint': given twice (first on line 2); give it once"),
            std::string::npos)
      << twice.message();
  auto inner = Write("loom_cfg_twice_inner.yaml", "model:\n  layers: 2\n  layers: 4\n");
  auto r2 = ConfigSection::LoadFile(inner);
  ASSERT_TRUE(r2.ok());
  auto model = r2->Section("model", true);
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE(model->Int("layers", &n, true, 1, 100).ok());
  EXPECT_NE(
      model->Finish().message().find(":3: field 'model.layers': given twice (first on line 2)"),
      std::string::npos);
}

TEST(ConfigSection, SyntaxAndMissingFile) {
  auto path = Write("loom_cfg_syntax.yaml", "a: [1, 2\n");
  auto r = ConfigSection::LoadFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("YAML syntax error"), std::string::npos);
  EXPECT_EQ(ConfigSection::LoadFile("/nonexistent/x.yaml").status().code(), StatusCode::kNotFound);
}

TEST(ConfigSection, ListsOfMappingsAndNumbers) {
  auto path = Write("loom_cfg_lists.yaml",
                    "nodes:\n  - name: a\n    devices: 8\n  - name: b\n    devices: x\n"
                    "names: [a, b]\nbw: [1, 2.5]\nm:\n  - [0, 1]\n  - [1, oops]\n");
  auto root = ConfigSection::LoadFile(path);
  ASSERT_TRUE(root.ok());
  auto nodes = root->List("nodes", true);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 2u);
  int64_t devices = 0;
  EXPECT_TRUE((*nodes)[0].Int("devices", &devices, true, 1, 64).ok());
  EXPECT_EQ(devices, 8);
  Status bad = (*nodes)[1].Int("devices", &devices, true, 1, 64);
  EXPECT_NE(bad.message().find(path + ":5: field 'nodes[1].devices': expected an integer"),
            std::string::npos)
      << bad.message();
  std::vector<std::string> names;
  ASSERT_TRUE(root->StringList("names", &names, true).ok());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));
  std::vector<double> bw;
  ASSERT_TRUE(root->DoubleList("bw", &bw, true, 0, 10).ok());
  EXPECT_EQ(bw, (std::vector<double>{1, 2.5}));
  std::vector<std::vector<double>> m;
  Status bad_m = root->DoubleMatrix("m", &m, true, 0, 10);
  EXPECT_NE(bad_m.message().find(path + ":10: field 'm[1][1]': expected a number"),
            std::string::npos)
      << bad_m.message();
  EXPECT_EQ(root->Keys(), (std::vector<std::string>{"nodes", "names", "bw", "m"}));
  Status not_list = root->List("names", true).status();
  EXPECT_NE(not_list.message().find("field 'names[0]': expected a mapping"), std::string::npos)
      << not_list.message();
}

}  // namespace
}  // namespace loom
