// Embedding lookup and its scatter-add backward.
#include "core/kernels/embedding.h"

#include <algorithm>

namespace loom {

template <typename T>
void EmbeddingForward(T* out, const int32_t* tokens, const int32_t* positions, const T* wte,
                      const T* wpe, const EmbeddingShape& s) {
  const int64_t c = s.channels;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < s.n; ++i) {
    T* o = out + i * c;
    int64_t row = tokens[i] - s.vocab_begin;
    bool local = row >= 0 && row < s.vocab_rows;
    const T* w = wte + row * c;
    if (wpe != nullptr) {
      const T* p = wpe + (positions ? positions[i] : i % s.seq) * c;
      if (local) {
        for (int64_t j = 0; j < c; ++j) o[j] = w[j] + p[j];
      } else {
        std::copy(p, p + c, o);
      }
    } else if (local) {
      std::copy(w, w + c, o);
    } else {
      std::fill(o, o + c, T(0));
    }
  }
}

template <typename T>
void EmbeddingBackward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens,
                       const int32_t* positions, const EmbeddingShape& s) {
  // Threads own disjoint channel ranges, so repeated tokens/positions never race.
  const int64_t c = s.channels;
  constexpr int64_t kCols = 32;
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < c; c0 += kCols) {
    int64_t c1 = std::min(c, c0 + kCols);
    for (int64_t i = 0; i < s.n; ++i) {
      const T* g = dout + i * c;
      int64_t row = tokens[i] - s.vocab_begin;
      if (dwte != nullptr && row >= 0 && row < s.vocab_rows) {
        T* w = dwte + row * c;
        for (int64_t j = c0; j < c1; ++j) w[j] += g[j];
      }
      if (dwpe != nullptr) {
        T* p = dwpe + (positions ? positions[i] : i % s.seq) * c;
        for (int64_t j = c0; j < c1; ++j) p[j] += g[j];
      }
    }
  }
}

template void EmbeddingForward<float>(float*, const int32_t*, const int32_t*, const float*,
                                      const float*, const EmbeddingShape&);
template void EmbeddingForward<double>(double*, const int32_t*, const int32_t*, const double*,
                                       const double*, const EmbeddingShape&);
template void EmbeddingBackward<float>(float*, float*, const float*, const int32_t*, const int32_t*,
                                       const EmbeddingShape&);
template void EmbeddingBackward<double>(double*, double*, const double*, const int32_t*,
                                        const int32_t*, const EmbeddingShape&);

}  // namespace loom
