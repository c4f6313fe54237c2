// The export's narrowing conversions: round to nearest, ties to even, checked bit for bit against
// values worked out by hand, and F16's range refused by name.
#include "checkpoint/export.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tests/test_util.h"

namespace loom {
namespace {

using testing::FloatFromBits;

TEST(ExportDtype, Bf16RoundsToNearestEven) {
  const std::vector<std::pair<float, uint16_t>> cases = {
      {1.0f, 0x3f80},
      {-2.0f, 0xc000},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {FloatFromBits(0x3f808000), 0x3f80},  // exactly half way, even below: down
      {FloatFromBits(0x3f818000), 0x3f82},  // exactly half way, odd below: up to even
      {FloatFromBits(0x3f808001), 0x3f81},  // just above half way: up
      {FloatFromBits(0x3f807fff), 0x3f80},  // just below half way: down
      {FloatFromBits(0x7f7fffff), 0x7f80},  // the largest float rounds to infinity, as it must
      {std::numeric_limits<float>::infinity(), 0x7f80},
      {FloatFromBits(0x00000001), 0x0000},  // the smallest subnormal rounds to zero
  };
  for (const auto& [in, want] : cases) {
    uint16_t out = 0;
    ToBf16(&in, &out, 1);
    EXPECT_EQ(out, want) << std::hexfloat << in;
  }
  const float nan = FloatFromBits(0x7f800001);  // a NaN whose payload is all in the low half
  uint16_t out = 0;
  ToBf16(&nan, &out, 1);
  EXPECT_EQ(out & 0x7f80, 0x7f80);
  EXPECT_NE(out & 0x007f, 0) << "a NaN must not become infinity";
}

TEST(ExportDtype, F16RoundsToNearestEvenAndRefusesOverflow) {
  const std::vector<std::pair<float, uint16_t>> cases = {
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {65504.0f, 0x7bff},                 // F16's largest
      {1.0f + 1.0f / 2048, 0x3c00},       // half way between 1 and 1 + 2^-10: to even (1)
      {1.0f + 3.0f / 2048, 0x3c02},       // half way between 1 + 2^-10 and 1 + 2^-9: to even
      {5.960464477539063e-08f, 0x0001},   // 2^-24, the smallest subnormal
      {2.9802322387695312e-08f, 0x0000},  // 2^-25, half of it: ties to even, zero
      {65519.0f, 0x7bff},                 // below the half way point to 65536: still finite
  };
  for (const auto& [in, want] : cases) {
    uint16_t out = 0;
    ASSERT_TRUE(ToF16(&in, &out, 1, "t").ok()) << in;
    EXPECT_EQ(out, want) << in;
  }
  const std::vector<float> too_big = {1.0f, 2.0f, 65520.0f};  // rounds up to infinity
  std::vector<uint16_t> out(too_big.size());
  const Status st = ToF16(too_big.data(), out.data(), too_big.size(), "ckpt: tensor 'wte'");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ckpt: tensor 'wte': element 2 is 65520"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("beyond float16's range"), std::string::npos) << st.message();
  // Infinity in a checkpoint is not an overflow of the conversion: it stays infinity.
  const float inf = std::numeric_limits<float>::infinity();
  uint16_t h = 0;
  ASSERT_TRUE(ToF16(&inf, &h, 1, "t").ok());
  EXPECT_EQ(h, 0x7c00);
}

TEST(ExportDtype, Parse) {
  EXPECT_EQ(*ParseFloatDType("bf16", "--dtype"), DType::kBF16);
  EXPECT_EQ(*ParseFloatDType("fp16", "--dtype"), DType::kF16);
  EXPECT_EQ(*ParseFloatDType("f32", "--dtype"), DType::kF32);
  const auto bad = ParseFloatDType("int8", "--dtype");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--dtype: expected f32, bf16 or f16, got 'int8'"),
            std::string::npos);
}

}  // namespace
}  // namespace loom
