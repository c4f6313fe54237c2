// Safetensors round trip, and refusal of corrupt files with the file and tensor named.
#include "core/safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "core/file_util.h"

namespace loom {
namespace {

std::string TempPath(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string("loom_st_") + name)).string();
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

}  // namespace
}  // namespace loom
