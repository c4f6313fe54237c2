// RS(k, m) over ISA-L: for every k <= 10 and m <= 4, every pattern of up to m lost fragments is
// rebuilt bit for bit (data and parity); more than m lost is refused.
#include "fault/erasure/reed_solomon.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace loom {
namespace {

using Bytes = std::vector<uint8_t>;

// Calls fn(lost) for every subset of [0, n) of size 1..max_lost, as a sorted index list.
template <typename Fn>
void ForEachPattern(int n, int max_lost, Fn fn) {
  for (uint64_t mask = 1; mask < (uint64_t{1} << n); ++mask) {
    if (__builtin_popcountll(mask) > max_lost) continue;
    std::vector<int> lost;
    for (int i = 0; i < n; ++i) {
      if (mask >> i & 1) lost.push_back(i);
    }
    fn(lost);
  }
}

TEST(ReedSolomon, EveryErasurePatternUpToMIsRebuiltBitExact) {
  std::mt19937 rng(7);
  int patterns = 0, expected = 0;
  for (int k = 1; k <= 10; ++k) {
    for (int m = 1; m <= 4; ++m) {
      Result<ReedSolomon> rs = ReedSolomon::Create(k, m);
      ASSERT_TRUE(rs.ok()) << rs.status().ToString();
      const size_t len = 257 + static_cast<size_t>(rng() % 700);  // odd lengths too
      std::vector<Bytes> frag(static_cast<size_t>(k + m), Bytes(len));
      for (int i = 0; i < k; ++i) {
        for (uint8_t& b : frag[i]) b = static_cast<uint8_t>(rng());
      }
      std::vector<const uint8_t*> data;
      std::vector<uint8_t*> parity;
      for (int i = 0; i < k; ++i) data.push_back(frag[i].data());
      for (int i = k; i < k + m; ++i) parity.push_back(frag[i].data());
      rs->Encode(len, data.data(), parity.data());
      for (int lost = 1, c = 1; lost <= m; ++lost) {  // patterns of `lost`: C(k + m, lost)
        c = c * (k + m - lost + 1) / lost;
        expected += c;
      }
      ForEachPattern(k + m, m, [&](const std::vector<int>& lost) {
        std::vector<const uint8_t*> present(static_cast<size_t>(k + m));
        for (int i = 0; i < k + m; ++i) present[i] = frag[i].data();
        for (int i : lost) present[i] = nullptr;
        std::vector<Bytes> out(lost.size(), Bytes(len, 0xEE));
        std::vector<uint8_t*> outp;
        for (Bytes& b : out) outp.push_back(b.data());
        ASSERT_TRUE(rs->Decode(len, present, lost, outp.data()).ok());
        for (size_t j = 0; j < lost.size(); ++j) {
          ASSERT_EQ(out[j], frag[lost[j]]) << "RS(" << k << "," << m << ") fragment " << lost[j]
                                           << " of a pattern of " << lost.size();
        }
        ++patterns;
      });
    }
  }
  EXPECT_EQ(patterns, expected);  // every pattern was tried
  EXPECT_EQ(expected, 6772);
}

TEST(ReedSolomon, MoreThanMLostIsRefused) {
  Result<ReedSolomon> rs = ReedSolomon::Create(4, 2);
  ASSERT_TRUE(rs.ok());
  Bytes a(64, 1);
  std::vector<const uint8_t*> present(6, a.data());
  present[0] = present[3] = present[5] = nullptr;
  Bytes out(64);
  uint8_t* o = out.data();
  Status st = rs->Decode(64, present, {0}, &o);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("3 fragments present, 4 needed"), std::string::npos) << st.message();
}

TEST(ReedSolomon, BadShapesAreRefused) {
  EXPECT_FALSE(ReedSolomon::Create(0, 1).ok());
  EXPECT_FALSE(ReedSolomon::Create(4, 0).ok());
  EXPECT_FALSE(ReedSolomon::Create(60, 5).ok());
  EXPECT_TRUE(ReedSolomon::Create(60, 4).ok());
}

TEST(ReedSolomon, ParityIsNotACopyOfTheData) {
  // A code that "rebuilt" by copying would pass the round trip above for some patterns only if
  // parity held the data: check it does not, for RS(2, 1) (which a XOR code would also satisfy)
  // and RS(3, 2).
  for (auto [k, m] : {std::pair{2, 1}, std::pair{3, 2}}) {
    Result<ReedSolomon> rs = ReedSolomon::Create(k, m);
    ASSERT_TRUE(rs.ok());
    std::vector<Bytes> d(static_cast<size_t>(k), Bytes(32));
    for (int i = 0; i < k; ++i) {
      for (size_t j = 0; j < 32; ++j) d[i][j] = static_cast<uint8_t>(i * 37 + j * 11 + 1);
    }
    std::vector<Bytes> p(static_cast<size_t>(m), Bytes(32));
    std::vector<const uint8_t*> dp;
    std::vector<uint8_t*> pp;
    for (auto& b : d) dp.push_back(b.data());
    for (auto& b : p) pp.push_back(b.data());
    rs->Encode(32, dp.data(), pp.data());
    for (const Bytes& par : p) {
      for (const Bytes& dat : d) EXPECT_NE(par, dat);
    }
  }
}

}  // namespace
}  // namespace loom
