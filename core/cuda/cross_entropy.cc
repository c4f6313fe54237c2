// The chunked cross-entropy composed from the fp32 cuBLASLt GEMM and the chunk kernels, step for
// step as core/kernels/cross_entropy.cc.
#include "core/cuda/cross_entropy.h"

#include <algorithm>
#include <string>

#include "core/cuda/kernels.h"

namespace loom::cuda {
namespace {

Status CheckShard(const VocabShard& s, const char* what) {
  if (s.n < 0 || s.channels <= 0 || s.rows < 0 || s.chunk <= 0) {
    return InvalidArgument(std::string(what) + ": bad shard n=" + std::to_string(s.n) +
                           " channels=" + std::to_string(s.channels) +
                           " rows=" + std::to_string(s.rows) + " chunk=" + std::to_string(s.chunk));
  }
  return Status::Ok();
}

// Rows of the shard below vocab_valid: the padding rows are never multiplied at all.
int64_t ValidRows(const VocabShard& s) {
  return std::clamp<int64_t>(s.vocab_valid - s.vocab_begin, 0, s.rows);
}

}  // namespace

Status CrossEntropyStats(GemmHandle& handle, float* max, float* sumexp, float* target_logit,
                         const float* x, const float* wte, const int32_t* targets,
                         const VocabShard& s, float* chunk_buf, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckShard(s, "CrossEntropyStats"));
  LOOM_RETURN_IF_ERROR(CrossEntropyStatsInit(max, sumexp, target_logit, s.n, stream));
  if (s.n == 0) return Status::Ok();
  const int64_t valid_rows = ValidRows(s), c = s.channels;
  for (int64_t v0 = 0; v0 < valid_rows; v0 += s.chunk) {
    const int64_t vc = std::min(s.chunk, valid_rows - v0);
    LOOM_RETURN_IF_ERROR(GemmF32(handle, false, true, s.n, vc, c, 1.0f, x, c, wte + v0 * c, c, 0.0f,
                                 chunk_buf, vc, stream));
    LOOM_RETURN_IF_ERROR(CrossEntropyChunkStats(max, sumexp, target_logit, chunk_buf, vc, s.n, vc,
                                                s.vocab_begin + v0, targets, stream));
  }
  return Status::Ok();
}

Status CrossEntropyBackward(GemmHandle& handle, float* dx, float* dwte, const float* x,
                            const float* wte, const int32_t* targets, const float* lse,
                            const float* dloss, const VocabShard& s, float* chunk_buf,
                            Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckShard(s, "CrossEntropyBackward"));
  if (s.n == 0 || (dx == nullptr && dwte == nullptr)) return Status::Ok();
  const int64_t valid_rows = ValidRows(s), c = s.channels;
  for (int64_t v0 = 0; v0 < valid_rows; v0 += s.chunk) {
    const int64_t vc = std::min(s.chunk, valid_rows - v0);
    const float* w = wte + v0 * c;
    LOOM_RETURN_IF_ERROR(
        GemmF32(handle, false, true, s.n, vc, c, 1.0f, x, c, w, c, 0.0f, chunk_buf, vc, stream));
    LOOM_RETURN_IF_ERROR(CrossEntropyChunkGrad(chunk_buf, vc, s.n, vc, vc, s.vocab_begin + v0,
                                               targets, lse, dloss, stream));
    if (dx != nullptr) {
      LOOM_RETURN_IF_ERROR(GemmF32(handle, false, false, s.n, c, vc, 1.0f, chunk_buf, vc, w, c,
                                   1.0f, dx, c, stream));
    }
    if (dwte != nullptr) {
      LOOM_RETURN_IF_ERROR(GemmF32(handle, true, false, vc, c, s.n, 1.0f, chunk_buf, vc, x, c, 1.0f,
                                   dwte + v0 * c, c, stream));
    }
  }
  return Status::Ok();
}

Status CrossEntropyStatsBf16(GemmHandle& handle, float* max, float* sumexp, float* target_logit,
                             const uint16_t* x, const uint16_t* wte, const int32_t* targets,
                             const VocabShard& s, float* chunk_buf, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckShard(s, "CrossEntropyStatsBf16"));
  LOOM_RETURN_IF_ERROR(CrossEntropyStatsInit(max, sumexp, target_logit, s.n, stream));
  if (s.n == 0) return Status::Ok();
  const int64_t valid_rows = ValidRows(s), c = s.channels;
  for (int64_t v0 = 0; v0 < valid_rows; v0 += s.chunk) {
    const int64_t vc = std::min(s.chunk, valid_rows - v0);
    LOOM_RETURN_IF_ERROR(GemmBf16(handle, false, true, s.n, vc, c, x, c, wte + v0 * c, c, 0.0f,
                                  chunk_buf, vc, stream));
    LOOM_RETURN_IF_ERROR(CrossEntropyChunkStats(max, sumexp, target_logit, chunk_buf, vc, s.n, vc,
                                                s.vocab_begin + v0, targets, stream));
  }
  return Status::Ok();
}

Status CrossEntropyBackwardBf16(GemmHandle& handle, float* dx, float* dwte, const uint16_t* x,
                                const uint16_t* wte, const int32_t* targets, const float* lse,
                                const float* dloss, const VocabShard& s, float* chunk_buf,
                                uint16_t* chunk16, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckShard(s, "CrossEntropyBackwardBf16"));
  if (s.n == 0 || (dx == nullptr && dwte == nullptr)) return Status::Ok();
  const int64_t valid_rows = ValidRows(s), c = s.channels;
  for (int64_t v0 = 0; v0 < valid_rows; v0 += s.chunk) {
    const int64_t vc = std::min(s.chunk, valid_rows - v0);
    const uint16_t* w = wte + v0 * c;
    LOOM_RETURN_IF_ERROR(
        GemmBf16(handle, false, true, s.n, vc, c, x, c, w, c, 0.0f, chunk_buf, vc, stream));
    LOOM_RETURN_IF_ERROR(CrossEntropyChunkGrad(chunk_buf, vc, s.n, vc, vc, s.vocab_begin + v0,
                                               targets, lse, dloss, stream));
    LOOM_RETURN_IF_ERROR(CastToBf16(chunk_buf, chunk16, s.n * vc, stream));
    if (dx != nullptr) {
      LOOM_RETURN_IF_ERROR(
          GemmBf16(handle, false, false, s.n, c, vc, chunk16, vc, w, c, 1.0f, dx, c, stream));
    }
    if (dwte != nullptr) {
      LOOM_RETURN_IF_ERROR(GemmBf16(handle, true, false, vc, c, s.n, chunk16, vc, x, c, 1.0f,
                                    dwte + v0 * c, c, stream));
    }
  }
  return Status::Ok();
}

}  // namespace loom::cuda
