// Token + position embedding: lookup, vocabulary shards, and the scatter-add backward.
#include "core/kernels/embedding.h"

#include <gtest/gtest.h>

#include "core/threads.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using testing::Dot;
using testing::RandomVector;

TEST(Embedding, ForwardIsLookupPlusPosition) {
  ConfigureThreads(2);
  const int64_t b = 2, t = 5, c = 40, v = 11;
  auto wte = RandomVector<double>(v * c, 1), wpe = RandomVector<double>(t * c, 2);
  auto tokens = testing::RandomTokens(b * t, v, 3);
  std::vector<double> out(b * t * c);
  EmbeddingShape s{b * t, t, c, 0, v};
  EmbeddingForward(out.data(), tokens.data(), nullptr, wte.data(), wpe.data(), s);
  for (int64_t i = 0; i < b * t; ++i)
    for (int64_t j = 0; j < c; ++j)
      ASSERT_EQ(out[i * c + j], wte[tokens[i] * c + j] + wpe[(i % t) * c + j]);
}

TEST(Embedding, VocabShardsSumToFullLookup) {
  ConfigureThreads(2);
  const int64_t n = 12, c = 8, v = 10;
  auto wte = RandomVector<double>(v * c, 4);
  auto tokens = testing::RandomTokens(n, v, 5);
  std::vector<double> full(n * c), sum(n * c, 0.0), part(n * c);
  EmbeddingForward<double>(full.data(), tokens.data(), nullptr, wte.data(), nullptr,
                           {n, n, c, 0, v});
  for (int64_t begin : {0, 4, 8}) {
    const int64_t rows = std::min<int64_t>(4, v - begin);
    EmbeddingForward<double>(part.data(), tokens.data(), nullptr, wte.data() + begin * c, nullptr,
                             {n, n, c, begin, rows});
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
  }
  EXPECT_EQ(sum, full);
}

TEST(Embedding, BackwardMatchesFiniteDifferences) {
  ConfigureThreads(2);
  const int64_t b = 3, t = 4, c = 33, v = 6;
  auto wte = RandomVector<double>(v * c, 6), wpe = RandomVector<double>(t * c, 7),
       r = RandomVector<double>(b * t * c, 8);
  auto tokens = testing::RandomTokens(b * t, v, 9);
  std::vector<int32_t> positions(b * t);
  for (int64_t i = 0; i < b * t; ++i) positions[i] = static_cast<int32_t>((i * 3) % t);
  std::vector<double> out(b * t * c);
  EmbeddingShape s{b * t, t, c, 0, v};
  auto loss = [&] {
    EmbeddingForward(out.data(), tokens.data(), positions.data(), wte.data(), wpe.data(), s);
    return Dot(out, r);
  };
  std::vector<double> dwte(v * c, 0.0), dwpe(t * c, 0.0);
  EmbeddingBackward(dwte.data(), dwpe.data(), r.data(), tokens.data(), positions.data(), s);
  testing::ExpectGradientMatches(wte, dwte, loss, "dwte");
  testing::ExpectGradientMatches(wpe, dwpe, loss, "dwpe");
}

}  // namespace
}  // namespace loom
