// loom ckpt diff's comparison: bit-for-bit counts, values (NaN, signed zero, infinity), the
// allclose tolerance with B as the reference, the reported maxima, element and norm-relative
// difference; and two checkpoints made by `loom ckpt import` from crafted weights, end to end.
#include "checkpoint/diff.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "checkpoint/import.h"
#include "core/safetensors.h"
#include "model/layout.h"
#include "parallel/param_layout.h"
#include "tests/checkpoint/temp_dir_test.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::FloatFromBits;

StateDiff Compare(const std::vector<float>& a, const std::vector<float>& b, double rtol = 0,
                  double atol = 0) {
  StateDiff d;
  CompareValues(a.data(), b.data(), static_cast<int64_t>(a.size()), rtol, atol, &d);
  return d;
}

TEST(DiffValues, IdenticalBitsCountNothing) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const StateDiff d = Compare({1, -2, nan, 0}, {1, -2, nan, 0});
  EXPECT_EQ(d.differing, 0);
  EXPECT_EQ(d.unequal, 0);
  EXPECT_EQ(d.worst, -1);
}

TEST(DiffValues, SignedZeroAndNanPayloadsDifferInBitsOnly) {
  const StateDiff d =
      Compare({-0.0f, FloatFromBits(0x7fc00000), 3}, {0.0f, FloatFromBits(0xffc00001), 3});
  EXPECT_EQ(d.differing, 2);
  EXPECT_EQ(d.unequal, 0);
  EXPECT_EQ(d.beyond_tol, 0);
  EXPECT_EQ(d.max_abs, 0);
  EXPECT_EQ(d.worst, -1);
}

TEST(DiffValues, ReportsLargestDifferenceAndNormRelativeToB) {
  // |a-b|: 0.2 at 0, 0.5 at 2; ||a-b|| = sqrt(0.04 + 0.25), ||b|| = sqrt(1 + 4 + 16): relative
  // to b, not to max(|a|, |b|).
  const StateDiff d = Compare({1.2f, 2, 4.5f}, {1.0f, 2, 4.0f});
  EXPECT_EQ(d.differing, 2);
  EXPECT_EQ(d.unequal, 2);
  EXPECT_EQ(d.worst, 2);
  EXPECT_NEAR(d.max_abs, 0.5, 1e-6);
  EXPECT_NEAR(RelativeNorm(d), std::sqrt(0.29 / 21), 1e-6);
}

TEST(DiffValues, NormRelativeDifferenceIsNotDominatedByElementsNearZero) {
  // The case: 3e-6 off on a weight of 3e-10 is 1e4 elementwise, but among weights of
  // about 0.02 the tensor is 3e-6 / (0.02 * sqrt(1000)) = 4.7e-6 away.
  std::vector<float> a(1000, 0.02f), b(1000, 0.02f);
  b[7] = 3e-10f;
  a[7] = b[7] + 3e-6f;
  const StateDiff d = Compare(a, b);
  EXPECT_EQ(d.unequal, 1);
  EXPECT_NEAR(d.max_abs, 3e-6, 1e-9);
  EXPECT_LT(RelativeNorm(d), 1e-5);
  EXPECT_GT(RelativeNorm(d), 4e-6);
}

TEST(DiffValues, NormsAddUpOverPieces) {
  // One tensor compared in two calls: identical first half included in B's norm.
  const std::vector<float> a = {3, 4, 1.5f}, b = {3, 4, 1};
  StateDiff whole = Compare(a, b), pieces;
  CompareValues(a.data(), b.data(), 2, 0, 0, &pieces);
  CompareValues(a.data() + 2, b.data() + 2, 1, 0, 0, &pieces);
  EXPECT_DOUBLE_EQ(RelativeNorm(pieces), RelativeNorm(whole));
  EXPECT_NEAR(RelativeNorm(whole), 0.5 / std::sqrt(26.0), 1e-9);
  EXPECT_EQ(RelativeNorm(Compare(b, b)), 0);
}

TEST(DiffValues, ToleranceIsAllcloseWithBAsReference) {
  // 1.1 vs 1.0: |a-b| = 0.1 needs rtol >= 0.1 / |b| = 0.1; the roles swapped, 0.1 / 1.1 = 0.0909.
  EXPECT_EQ(Compare({1.1f}, {1.0f}, 0.1001).beyond_tol, 0);
  EXPECT_EQ(Compare({1.1f}, {1.0f}, 0.0910).beyond_tol, 1);
  EXPECT_EQ(Compare({1.0f}, {1.1f}, 0.0910).beyond_tol, 0);
  EXPECT_EQ(Compare({1.0f}, {1.1f}, 0.0905).beyond_tol, 1);
  EXPECT_NEAR(RelativeNorm(Compare({1.0f}, {1.1f})), 0.1 / 1.1, 1e-6);
  // atol alone; atol + rtol*|b| together.
  EXPECT_EQ(Compare({1.1f}, {1.0f}, 0, 0.1001).beyond_tol, 0);
  EXPECT_EQ(Compare({1.1f}, {1.0f}, 0, 0.0999).beyond_tol, 1);
  EXPECT_EQ(Compare({1.1f}, {1.0f}, 0.05, 0.0501).beyond_tol, 0);
  EXPECT_EQ(Compare({1.1f}, {1.0f}, 0.05, 0.0499).beyond_tol, 1);
}

TEST(DiffValues, NanAgainstANumberAndInfinitiesAreInfinitelyFar) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  StateDiff d = Compare({nan, 1}, {1, 1}, 0, 1e30);
  EXPECT_EQ(d.unequal, 1);
  EXPECT_EQ(d.beyond_tol, 1);
  EXPECT_TRUE(std::isinf(d.max_abs));
  EXPECT_TRUE(std::isinf(RelativeNorm(d)));
  d = Compare({inf, -inf}, {1, -inf}, 0, 1e30);
  EXPECT_EQ(d.differing, 1);
  EXPECT_EQ(d.beyond_tol, 1);
  EXPECT_EQ(d.worst, 0);
  d = Compare({1e-3f}, {0}, 0, 1e-2);  // b = 0: no relative difference, only atol helps
  EXPECT_EQ(d.beyond_tol, 0);
  EXPECT_TRUE(std::isinf(RelativeNorm(d)));
  // An infinity that matches is no difference and leaves B's norm to the finite elements.
  d = Compare({inf, 2}, {inf, 1});
  EXPECT_EQ(d.unequal, 1);
  EXPECT_NEAR(RelativeNorm(d), 1.0, 1e-9);
}

// Two imported checkpoints of a tiny model whose weights differ in one element of one tensor.
class DiffCheckpointsTest : public TempDirTest {
 protected:
  // A checkpoint of `model` with weights i * 1e-3 (element `poke` of tensor `name` set to
  // `value` when name is given), under root `root`.
  std::string Make(const std::string& root, const ModelConfig& model, const std::string& name = "",
                   int64_t poke = 0, float value = 0) {
    const ParamLayout layout = ModelLayout(model, 1);
    std::vector<std::vector<float>> data;
    std::vector<NamedTensor> tensors;
    for (const ParamInfo& p : layout.params) {
      data.emplace_back(static_cast<size_t>(p.numel()));
      for (size_t i = 0; i < data.back().size(); ++i)
        data.back()[i] = 1e-3f * static_cast<float>(i);
      if (p.name == name) data.back()[static_cast<size_t>(poke)] = value;
      tensors.push_back({p.name, Tensor::Borrow(data.back().data(), p.global_shape, DType::kF32)});
    }
    const std::string file = Path(root + ".safetensors");
    EXPECT_TRUE(WriteSafetensors(file, tensors, {{"naming", "loom"}, {"format", "pt"}}).ok());
    Result<ImportResult> r = ImportSafetensors(file, Path(root), model.heads);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return Path(root);
  }
  ModelConfig model_{.vocab = 17, .max_seq = 8, .layers = 1, .heads = 2, .hidden = 8};
};

TEST_F(DiffCheckpointsTest, FindsTheOneElementThatDiffers) {
  const std::string a = Make("a", model_);
  const std::string b = Make("b", model_, "h.0.attn.c_attn.weight", 13, 5.0f);
  Result<DiffReport> r = DiffCheckpoints(a, b, 0, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->a_imported && r->b_imported);
  EXPECT_TRUE(r->notes.empty()) << r->notes[0];  // imported: no training state to compare
  EXPECT_EQ(r->differing, 1);
  const ParamLayout layout = ModelLayout(model_, 1);
  ASSERT_EQ(r->states.size(), layout.params.size() * 3);
  for (const StateDiff& d : r->states) {
    const bool poked = d.tensor == "h.0.attn.c_attn.weight" && d.state == StateKind::kParam;
    EXPECT_EQ(d.differing, poked ? 1 : 0) << d.tensor << " " << StateName(d.state);
    if (poked) {
      EXPECT_EQ(d.worst, 13);
      EXPECT_NEAR(d.max_abs, 5.0 - 13e-3, 1e-6);
      EXPECT_EQ(d.cols, 8);  // [3 * hidden, hidden]: element 13 is row 1, col 5
    }
  }
  Result<DiffReport> w = DiffCheckpoints(a, b, 0, 0, /*weights_only=*/true);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->states.size(), layout.params.size());
  Result<DiffReport> same = DiffCheckpoints(a, a, 0, 0);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->differing, 0);
}

TEST_F(DiffCheckpointsTest, RefusesDifferentModelsNamingEveryField) {
  const std::string a = Make("a", model_);
  ModelConfig other = model_;
  other.layers = 2;
  other.hidden = 16;
  const std::string b = Make("b", other);
  Result<DiffReport> r = DiffCheckpoints(a, b, 0, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model.layers: 1 vs 2"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("model.hidden: 8 vs 16"), std::string::npos);
}

TEST_F(DiffCheckpointsTest, RefusesTemporaryDirectories) {
  const std::string a = Make("a", model_);
  std::filesystem::rename(a + "/step_00000000", a + "/step_00000000.tmp");
  Result<DiffReport> r = DiffCheckpoints(a + "/step_00000000.tmp", a + "/step_00000000.tmp", 0, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(".tmp"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace loom
