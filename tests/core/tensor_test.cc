#include "core/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace loom {
namespace {

TEST(Tensor, OwnedIsAlignedZeroedAndAccounted) {
  const int64_t before = GetMemUsage(MemTag::kGrads).current;
  {
    auto t = Tensor::Zeros({3, 5}, DType::kF32, MemTag::kGrads);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw()) % 64, 0u);
    EXPECT_EQ(t->nbytes(), 60u);
    for (int i = 0; i < 15; ++i) EXPECT_EQ(t->data<float>()[i], 0.f);
    EXPECT_EQ(GetMemUsage(MemTag::kGrads).current, before + 60);
    auto view = t->View(5, {2, 5});
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(view->data<float>(), t->data<float>() + 5);
    EXPECT_FALSE(t->View(6, {2, 5}).ok());
  }
  EXPECT_EQ(GetMemUsage(MemTag::kGrads).current, before);
  EXPECT_GE(GetMemUsage(MemTag::kGrads).peak, before + 60);
}

TEST(Tensor, ViewKeepsStorageAlive) {
  Tensor view;
  {
    auto t = Tensor::Zeros({4}, DType::kF64, MemTag::kOther);
    ASSERT_TRUE(t.ok());
    t->data<double>()[3] = 2.5;
    view = *t->View(3, {1});
  }
  EXPECT_EQ(view.data<double>()[0], 2.5);
}

TEST(Tensor, DTypeNames) {
  EXPECT_EQ(*DTypeFromName("BF16"), DType::kBF16);
  EXPECT_FALSE(DTypeFromName("F8").ok());
  EXPECT_EQ(DTypeSize(DType::kU16), 2u);
}

}  // namespace
}  // namespace loom
