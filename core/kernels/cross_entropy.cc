// Chunked vocabulary cross-entropy.
#include "core/kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/kernels/blas.h"
#include "core/kernels/fast_math.h"

namespace loom {
namespace {

int64_t ValidRows(const VocabShard& s) {
  return std::clamp<int64_t>(s.vocab_valid - s.vocab_begin, 0, s.rows);
}

template <typename T>
void InitStats(T* max, T* sumexp, T* target_logit, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    max[i] = -std::numeric_limits<T>::infinity();
    sumexp[i] = T(0);
    target_logit[i] = T(0);
  }
}

// Folds the logits of vocabulary rows [v0, v0 + vc) (chunk_buf [n, vc]) into the statistics.
template <typename T>
void FoldChunk(T* max, T* sumexp, T* target_logit, const T* chunk_buf, const int32_t* targets,
               const VocabShard& s, int64_t v0, int64_t vc) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < s.n; ++i) {
    const T* z = chunk_buf + i * vc;
    T mx = max[i];
    for (int64_t j = 0; j < vc; ++j) mx = std::max(mx, z[j]);
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < vc; ++j) sum += FastExp(z[j] - mx);
    sumexp[i] = sumexp[i] * FastExp(max[i] - mx) + sum;
    max[i] = mx;
    const int64_t tgt = targets[i] - s.vocab_begin - v0;
    if (tgt >= 0 && tgt < vc) target_logit[i] = z[tgt];
  }
}

// The chunk's logits become their gradient: dloss_i * (softmax - onehot(target)).
template <typename T>
void ChunkGradient(T* chunk_buf, const int32_t* targets, const T* lse, const T* dloss,
                   const VocabShard& s, int64_t v0, int64_t vc) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < s.n; ++i) {
    T* z = chunk_buf + i * vc;
    const T li = lse[i], gi = dloss[i];
#pragma omp simd
    for (int64_t j = 0; j < vc; ++j) z[j] = gi * FastExp(z[j] - li);
    const int64_t tgt = targets[i] - s.vocab_begin - v0;
    if (tgt >= 0 && tgt < vc) z[tgt] -= gi;
  }
}

}  // namespace

template <typename T>
void CrossEntropyStats(T* max, T* sumexp, T* target_logit, const T* x, const T* wte,
                       const int32_t* targets, const VocabShard& s, T* chunk_buf) {
  const int64_t valid_rows = ValidRows(s);
  InitStats(max, sumexp, target_logit, s.n);
  for (int64_t v0 = 0; v0 < valid_rows; v0 += s.chunk) {
    const int64_t vc = std::min(s.chunk, valid_rows - v0);
    ParallelGemm<T>(false, true, s.n, vc, s.channels, T(1), x, s.channels, wte + v0 * s.channels,
                    s.channels, T(0), chunk_buf, vc);
    FoldChunk(max, sumexp, target_logit, chunk_buf, targets, s, v0, vc);
  }
}

Status CrossEntropyStatsBf16(float* max, float* sumexp, float* target_logit, const Bf16* x,
                             const Bf16* wte, const int32_t* targets, const VocabShard& s,
                             float* chunk_buf) {
  const int64_t valid_rows = ValidRows(s);
  InitStats(max, sumexp, target_logit, s.n);
  for (int64_t v0 = 0; v0 < valid_rows; v0 += s.chunk) {
    const int64_t vc = std::min(s.chunk, valid_rows - v0);
    LOOM_RETURN_IF_ERROR(GemmBf16(false, true, s.n, vc, s.channels, x, s.channels,
                                  wte + v0 * s.channels, s.channels, 0.0f, chunk_buf, vc));
    FoldChunk(max, sumexp, target_logit, chunk_buf, targets, s, v0, vc);
  }
  return Status::Ok();
}

Status CrossEntropyBackwardBf16(float* dx, float* dwte, const Bf16* x, const Bf16* wte,
                                const int32_t* targets, const float* lse, const float* dloss,
                                const VocabShard& s, float* chunk_buf, Bf16* chunk16) {
  const int64_t valid_rows = ValidRows(s);
  for (int64_t v0 = 0; v0 < valid_rows; v0 += s.chunk) {
    const int64_t vc = std::min(s.chunk, valid_rows - v0);
    const Bf16* w = wte + v0 * s.channels;
    LOOM_RETURN_IF_ERROR(GemmBf16(false, true, s.n, vc, s.channels, x, s.channels, w, s.channels,
                                  0.0f, chunk_buf, vc));
    ChunkGradient(chunk_buf, targets, lse, dloss, s, v0, vc);
    CastToBf16(chunk_buf, chunk16, s.n * vc);
    if (dx) {
      LOOM_RETURN_IF_ERROR(GemmBf16(false, false, s.n, s.channels, vc, chunk16, vc, w, s.channels,
                                    1.0f, dx, s.channels));
    }
    if (dwte) {
      LOOM_RETURN_IF_ERROR(GemmBf16(true, false, vc, s.channels, s.n, chunk16, vc, x, s.channels,
                                    1.0f, dwte + v0 * s.channels, s.channels));
    }
  }
  return Status::Ok();
}

template <typename T>
void CrossEntropyFinish(T* lse, T* loss, const T* max, const T* sumexp, const T* target_logit,
                        int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    lse[i] = max[i] + std::log(sumexp[i]);
    if (loss) loss[i] = lse[i] - target_logit[i];
  }
}

template <typename T>
void CrossEntropyBackward(T* dx, T* dwte, const T* x, const T* wte, const int32_t* targets,
                          const T* lse, const T* dloss, const VocabShard& s, T* chunk_buf) {
  const int64_t valid_rows = ValidRows(s);
  for (int64_t v0 = 0; v0 < valid_rows; v0 += s.chunk) {
    const int64_t vc = std::min(s.chunk, valid_rows - v0);
    const T* w = wte + v0 * s.channels;
    ParallelGemm<T>(false, true, s.n, vc, s.channels, T(1), x, s.channels, w, s.channels, T(0),
                    chunk_buf, vc);
    ChunkGradient(chunk_buf, targets, lse, dloss, s, v0, vc);
    if (dx) {
      ParallelGemm<T>(false, false, s.n, s.channels, vc, T(1), chunk_buf, vc, w, s.channels, T(1),
                      dx, s.channels);
    }
    if (dwte) {
      ParallelGemm<T>(true, false, vc, s.channels, s.n, T(1), chunk_buf, vc, x, s.channels, T(1),
                      dwte + v0 * s.channels, s.channels);
    }
  }
}

#define LOOM_INSTANTIATE_CE(T)                                                                \
  template void CrossEntropyStats<T>(T*, T*, T*, const T*, const T*, const int32_t*,          \
                                     const VocabShard&, T*);                                  \
  template void CrossEntropyFinish<T>(T*, T*, const T*, const T*, const T*, int64_t);         \
  template void CrossEntropyBackward<T>(T*, T*, const T*, const T*, const int32_t*, const T*, \
                                        const T*, const VocabShard&, T*);
LOOM_INSTANTIATE_CE(float)
LOOM_INSTANTIATE_CE(double)

}  // namespace loom
