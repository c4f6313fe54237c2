// The cuBLASLt GEMMs against a double-precision reference computed from the same (bf16-rounded)
// inputs, for every transpose combination, beta 0 and 1 (and any alpha/beta for fp32), odd sizes,
// leading dimensions wider than the matrix, operands not 256-byte aligned, and k == 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda/gemm.h"
#include "core/half.h"
#include "tests/core/cuda_test_util.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::DeviceBuffer;

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  int64_t pad;     // extra columns of every leading dimension
  int64_t offset;  // elements skipped at the start of A and B (misaligns them)
};

std::string Name(const Case& c) {
  return std::string(c.ta ? "T" : "N") + (c.tb ? "T" : "N") + " m=" + std::to_string(c.m) +
         " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
         " pad=" + std::to_string(c.pad) + " offset=" + std::to_string(c.offset);
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      cases.push_back({ta, tb, 37, 29, 45, 3, 0});  // odd sizes, odd leading dimensions
      cases.push_back({ta, tb, 64, 48, 40, 8, 0});  // tensor-core friendly, padded by 8
      cases.push_back({ta, tb, 33, 17, 70, 0, 1});  // tight, misaligned by one element
      cases.push_back({ta, tb, 1, 130, 9, 2, 0});   // a single row
    }
  }
  return cases;
}

// Element (r, col) of op(X) where X is stored row-major with leading dimension ld.
template <typename T>
double OpAt(const std::vector<T>& x, bool trans, int64_t ld, int64_t r, int64_t col, int64_t offset,
            double (*to_double)(T)) {
  return to_double(x[offset + (trans ? col * ld + r : r * ld + col)]);
}

double FromBf16(uint16_t h) {
  return Bf16ToFloat(h);
}
double FromF32(float f) {
  return f;
}

// Checks C against alpha * op(A) op(B) + beta * C0 in double; the tolerance scales with
// sum_k |a b| (what fp32 accumulation errors are proportional to) plus |beta c0|. The padding
// columns of C (between n and ldc) must be untouched.
template <typename T>
void CheckResult(const Case& c, const std::vector<T>& a, int64_t lda, const std::vector<T>& b,
                 int64_t ldb, double (*to_double)(T), double alpha, double beta,
                 const std::vector<float>& c0, const std::vector<float>& got, int64_t ldc,
                 double rtol, const std::string& what) {
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const float g = got[i * ldc + j];
      if (j >= c.n) {
        if (std::memcmp(&g, &c0[i * ldc + j], sizeof(g)) != 0 && bad++ < 5) {
          first += "\n  padding (" + std::to_string(i) + "," + std::to_string(j) + ") written";
        }
        continue;
      }
      double ref = 0, mag = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double prod = OpAt(a, c.ta, lda, i, p, c.offset, to_double) *
                            OpAt(b, c.tb, ldb, p, j, c.offset, to_double);
        ref += prod;
        mag += std::fabs(prod);
      }
      ref = alpha * ref;
      mag = std::fabs(alpha) * mag;
      if (beta != 0) {
        ref += beta * c0[i * ldc + j];
        mag += std::fabs(beta * c0[i * ldc + j]);
      }
      if (!(std::fabs(g - ref) <= rtol * mag + 1e-6) && bad++ < 5) {
        first += "\n  (" + std::to_string(i) + "," + std::to_string(j) + ") got " +
                 std::to_string(g) + " want " + std::to_string(ref);
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " wrong elements (tolerance " << rtol
                    << " * sum|a b|)" << first;
}

// Storage of op(X) (rows x cols) with its transpose flag: stored rows x ld, ld >= stored columns.
struct Stored {
  int64_t rows, cols, ld;
};
Stored StoredShape(bool trans, int64_t r, int64_t c, int64_t pad) {
  return trans ? Stored{c, r, r + pad} : Stored{r, c, c + pad};
}

TEST(CudaGemm, Bf16MatchesDoubleReference) {
  LOOM_REQUIRE_GPU();
  LOOM_ASSERT_OK_AND_ASSIGN(auto handle, cuda::GemmHandle::Create());
  uint64_t seed = 100;
  for (const Case& c : Cases()) {
    for (float beta : {0.0f, 1.0f}) {
      const Stored sa = StoredShape(c.ta, c.m, c.k, c.pad), sb = StoredShape(c.tb, c.k, c.n, c.pad);
      const int64_t ldc = c.n + c.pad;
      std::vector<uint16_t> a(c.offset + sa.rows * sa.ld), b(c.offset + sb.rows * sb.ld);
      const auto af = testing::RandomVector<float>(a.size(), ++seed);
      const auto bf = testing::RandomVector<float>(b.size(), ++seed);
      for (size_t i = 0; i < a.size(); ++i) a[i] = FloatToBf16(af[i]);
      for (size_t i = 0; i < b.size(); ++i) b[i] = FloatToBf16(bf[i]);
      // beta 0: C starts as NaN, which must not leak into the result.
      std::vector<float> c0 = testing::RandomVector<float>(c.m * ldc, ++seed);
      if (beta == 0.0f) {
        for (int64_t i = 0; i < c.m; ++i) {
          for (int64_t j = 0; j < c.n; ++j) c0[i * ldc + j] = std::nanf("");
        }
      }
      LOOM_ASSERT_OK_AND_ASSIGN(auto da, DeviceBuffer<uint16_t>::From(a));
      LOOM_ASSERT_OK_AND_ASSIGN(auto db, DeviceBuffer<uint16_t>::From(b));
      LOOM_ASSERT_OK_AND_ASSIGN(auto dc, DeviceBuffer<float>::From(c0));
      const std::string what = "GemmBf16 " + Name(c) + " beta=" + std::to_string(beta);
      const Status st = cuda::GemmBf16(handle, c.ta, c.tb, c.m, c.n, c.k, da.get() + c.offset,
                                       sa.ld, db.get() + c.offset, sb.ld, beta, dc.get(), ldc);
      ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
      LOOM_ASSERT_OK_AND_ASSIGN(auto got, dc.Download());
      CheckResult<uint16_t>(c, a, sa.ld, b, sb.ld, FromBf16, 1.0, beta, c0, got, ldc, 1e-5, what);
    }
  }
}

TEST(CudaGemm, F32MatchesDoubleReference) {
  LOOM_REQUIRE_GPU();
  LOOM_ASSERT_OK_AND_ASSIGN(auto handle, cuda::GemmHandle::Create());
  ASSERT_FALSE(handle.allow_tf32());  // full fp32 by default: the tolerance below relies on it
  uint64_t seed = 500;
  for (const Case& c : Cases()) {
    for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{1.0f, 1.0f}, std::pair{0.5f, 0.25f},
                               std::pair{-2.0f, 1.0f}}) {
      const Stored sa = StoredShape(c.ta, c.m, c.k, c.pad), sb = StoredShape(c.tb, c.k, c.n, c.pad);
      const int64_t ldc = c.n + c.pad;
      const auto a = testing::RandomVector<float>(c.offset + sa.rows * sa.ld, ++seed);
      const auto b = testing::RandomVector<float>(c.offset + sb.rows * sb.ld, ++seed);
      const auto c0 = testing::RandomVector<float>(c.m * ldc, ++seed);
      LOOM_ASSERT_OK_AND_ASSIGN(auto da, DeviceBuffer<float>::From(a));
      LOOM_ASSERT_OK_AND_ASSIGN(auto db, DeviceBuffer<float>::From(b));
      LOOM_ASSERT_OK_AND_ASSIGN(auto dc, DeviceBuffer<float>::From(c0));
      const std::string what = "GemmF32 " + Name(c) + " alpha=" + std::to_string(alpha) +
                               " beta=" + std::to_string(beta);
      const Status st = cuda::GemmF32(handle, c.ta, c.tb, c.m, c.n, c.k, alpha, da.get() + c.offset,
                                      sa.ld, db.get() + c.offset, sb.ld, beta, dc.get(), ldc);
      ASSERT_TRUE(st.ok()) << what << ": " << st.ToString();
      LOOM_ASSERT_OK_AND_ASSIGN(auto got, dc.Download());
      CheckResult<float>(c, a, sa.ld, b, sb.ld, FromF32, alpha, beta, c0, got, ldc, 1e-5, what);
    }
  }
}

// k == 0: beta 0 zeroes C (the padding excepted), beta 1 leaves it; bad arguments are refused
// before anything runs.
TEST(CudaGemm, EmptyProductAndBadArguments) {
  LOOM_REQUIRE_GPU();
  LOOM_ASSERT_OK_AND_ASSIGN(auto handle, cuda::GemmHandle::Create());
  const int64_t m = 5, n = 7, ldc = 9;
  const auto c0 = testing::RandomVector<float>(m * ldc, 900);
  LOOM_ASSERT_OK_AND_ASSIGN(auto dc, DeviceBuffer<float>::From(c0));
  LOOM_ASSERT_OK_AND_ASSIGN(auto dab, DeviceBuffer<uint16_t>::Poisoned(64));
  LOOM_ASSERT_OK(cuda::GemmBf16(handle, false, false, m, n, 0, dab.get(), 1, dab.get(), n, 1.0f,
                                dc.get(), ldc));
  LOOM_ASSERT_OK_AND_ASSIGN(auto same, dc.Download());
  EXPECT_EQ(same, c0);
  LOOM_ASSERT_OK(cuda::GemmBf16(handle, false, false, m, n, 0, dab.get(), 1, dab.get(), n, 0.0f,
                                dc.get(), ldc));
  LOOM_ASSERT_OK_AND_ASSIGN(auto zeroed, dc.Download());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      EXPECT_EQ(zeroed[i * ldc + j], j < n ? 0.0f : c0[i * ldc + j]) << i << "," << j;
    }
  }
  const Status half = cuda::GemmBf16(handle, false, false, m, n, 3, dab.get(), 3, dab.get(), n,
                                     0.5f, dc.get(), ldc);
  EXPECT_EQ(half.code(), StatusCode::kInvalidArgument) << half.ToString();
  const Status narrow = cuda::GemmBf16(handle, false, false, m, n, 3, dab.get(), 2, dab.get(), n,
                                       0.0f, dc.get(), ldc);  // lda < k
  EXPECT_EQ(narrow.code(), StatusCode::kInvalidArgument) << narrow.ToString();
  const Status narrow_c = cuda::GemmBf16(handle, false, true, m, n, 3, dab.get(), 3, dab.get(), 3,
                                         0.0f, dc.get(), n - 1);  // ldc < n
  EXPECT_EQ(narrow_c.code(), StatusCode::kInvalidArgument) << narrow_c.ToString();
}

}  // namespace
}  // namespace loom
