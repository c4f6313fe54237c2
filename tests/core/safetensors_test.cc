// Safetensors round trip, and refusal of corrupt files with the file and tensor named.
#include "core/safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/file_util.h"
#include "tests/temp_dir.h"

namespace loom {
namespace {

std::string TempPath(const char* name) {
  return testing::TestTempPath(std::string("loom_st_") + name);
}

TEST(Safetensors, RoundTrip) {
  const std::string path = TempPath("rt.safetensors");
  auto a = *Tensor::Zeros({2, 3}, DType::kF32, MemTag::kOther);
  auto b = *Tensor::Zeros({4}, DType::kI32, MemTag::kOther);
  for (int i = 0; i < 6; ++i) a.data<float>()[i] = 0.5f * i;
  for (int i = 0; i < 4; ++i) b.data<int32_t>()[i] = -i;
  ASSERT_TRUE(WriteSafetensors(path, {{"w", a}, {"ids", b}}, {{"format", "pt"}}).ok());
  auto f = ReadSafetensors(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->metadata.at("format"), "pt");
  const Tensor& w = f->tensors.at("w");
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  EXPECT_EQ(w.data<float>()[5], 2.5f);
  EXPECT_EQ(f->tensors.at("ids").data<int32_t>()[3], -3);
  std::filesystem::remove(path);
}

TEST(Safetensors, TruncatedFileIsRefusedNamingTensor) {
  const std::string path = TempPath("trunc.safetensors");
  auto a = *Tensor::Zeros({100}, DType::kF32, MemTag::kOther);
  ASSERT_TRUE(WriteSafetensors(path, {{"big", a}}).ok());
  std::string bytes = *ReadFile(path);
  ASSERT_TRUE(WriteFileAtomic(path, bytes.substr(0, bytes.size() - 10)).ok());
  auto f = ReadSafetensors(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find(path), std::string::npos);
  EXPECT_NE(f.status().message().find("'big'"), std::string::npos);
  ASSERT_TRUE(WriteFileAtomic(path, "\xff\xff\xff\xff\xff\xff\xff\x7f{}").ok());
  EXPECT_FALSE(ReadSafetensors(path).ok());
  ASSERT_TRUE(WriteFileAtomic(path, std::string("\x02\0\0\0\0\0\0\0[]", 10)).ok());
  EXPECT_FALSE(ReadSafetensors(path).ok());
  std::filesystem::remove(path);
  EXPECT_EQ(ReadSafetensors(path).status().code(), StatusCode::kIoError);
}

TEST(Safetensors, HeaderAloneGivesEachTensorsPlace) {
  const std::string path = TempPath("header.safetensors");
  auto a = *Tensor::Zeros({2, 3}, DType::kF32, MemTag::kOther);
  auto b = *Tensor::Zeros({5}, DType::kF16, MemTag::kOther);
  ASSERT_TRUE(WriteSafetensors(path, {{"a", a}, {"b", b}}, {{"n_head", "4"}}).ok());
  auto h = ReadSafetensorsHeader(path);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->metadata.at("n_head"), "4");
  const SafetensorsEntry& ea = h->tensors.at("a");
  const SafetensorsEntry& eb = h->tensors.at("b");
  EXPECT_EQ(ea.dtype, DType::kF32);
  EXPECT_EQ(ea.shape, (Shape{2, 3}));
  EXPECT_EQ(ea.bytes, 24u);
  EXPECT_EQ(eb.dtype, DType::kF16);
  EXPECT_EQ(eb.bytes, 10u);
  // The data section follows the header: the tensors are its last 34 bytes, in order.
  const uint64_t size = std::filesystem::file_size(path);
  EXPECT_EQ(ea.offset, size - 34);
  EXPECT_EQ(eb.offset, size - 10);
  std::filesystem::remove(path);
}

TEST(Safetensors, ShapeWhoseSizeOverflowsIsRefused) {
  // 2^62 x 4 floats: the byte count wraps to 0, which an empty range would otherwise match.
  const std::string path = TempPath("overflow.safetensors");
  const std::string json =
      R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})";
  std::string bytes(8, '\0');
  const uint64_t len = json.size();
  std::memcpy(bytes.data(), &len, 8);
  ASSERT_TRUE(WriteFileAtomic(path, bytes + json).ok());
  for (const Status& st : {ReadSafetensors(path).status(), ReadSafetensorsHeader(path).status()}) {
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("tensor 'w'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("overflows"), std::string::npos) << st.message();
  }
  std::filesystem::remove(path);
}

// A header whose entries share bytes: a name given twice (the JSON parser would keep the last),
// or two names pointing at overlapping ranges. Both would give a tensor another's values.
TEST(Safetensors, SharedBytesAreRefused) {
  const std::string path = TempPath("shared.safetensors");
  auto write = [&](const std::string& json) {
    std::string bytes(8, '\0');
    const uint64_t len = json.size();
    std::memcpy(bytes.data(), &len, 8);
    ASSERT_TRUE(WriteFileAtomic(path, bytes + json + std::string(16, '\0')).ok());
  };
  write(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})");
  for (const Status& st : {ReadSafetensors(path).status(), ReadSafetensorsHeader(path).status()}) {
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("'b' appears twice"), std::string::npos) << st.message();
  }
  write(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})");
  for (const Status& st : {ReadSafetensors(path).status(), ReadSafetensorsHeader(path).status()}) {
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("tensors 'w' and 'b' overlap"), std::string::npos) << st.message();
  }
  // Adjacent, and an empty tensor inside another's range, are fine.
  write(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
        R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})");
  EXPECT_TRUE(ReadSafetensors(path).ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace loom
