// attention_gemm.h's compositions: per sequence of the batch and group of heads, batched GEMMs
// over the heads (a head's Q, K, V, out and dqkv columns sit head_dim apart) around the row
// kernels.
#include "core/cuda/attention_gemm.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace loom::cuda {
namespace {

Status CheckShape(const AttentionShape& s, const char* what) {
  if (s.batch < 0 || s.seq < 0 || s.heads < 0 || s.head_dim <= 0) {
    return InvalidArgument(std::string(what) + ": bad shape batch=" + std::to_string(s.batch) +
                           " seq=" + std::to_string(s.seq) + " heads=" + std::to_string(s.heads) +
                           " head_dim=" + std::to_string(s.head_dim));
  }
  return Status::Ok();
}

Status NoRoom(const AttentionShape& s, int64_t workspace_floats, bool backward, const char* what) {
  return InvalidArgument(std::string(what) + ": a workspace of " +
                         std::to_string(workspace_floats) + " floats holds no head's scores (" +
                         std::to_string((backward ? 2 : 1) * s.seq * s.seq) + " needed at T " +
                         std::to_string(s.seq) + ")");
}

float Scale(const AttentionShape& s) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
}

}  // namespace

int64_t AttentionGemmHeadsPerPass(const AttentionShape& s, int64_t workspace_floats,
                                  bool backward) {
  if (s.seq <= 0 || workspace_floats <= 0) return 0;
  const int64_t per_head = (backward ? 2 : 1) * s.seq * s.seq;
  return std::min(s.heads, workspace_floats / per_head);
}

Status AttentionForwardGemm(GemmHandle& handle, float* out, float* lse, const float* qkv,
                            const AttentionShape& s, float* workspace, int64_t workspace_floats,
                            Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckShape(s, "AttentionForwardGemm"));
  if (s.batch == 0 || s.seq == 0 || s.heads == 0) return Status::Ok();
  const int64_t group = AttentionGemmHeadsPerPass(s, workspace_floats, false);
  if (group == 0) return NoRoom(s, workspace_floats, false, "AttentionForwardGemm");
  const int64_t t = s.seq, hd = s.head_dim, c = s.heads * hd, tt = t * t;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h0 = 0; h0 < s.heads; h0 += group) {
      const int64_t g = std::min(group, s.heads - h0);
      const float* q = qkv + b * t * 3 * c + h0 * hd;
      // S = scale * Q K^T, then P in place, then out = P V.
      LOOM_RETURN_IF_ERROR(GemmF32Batched(handle, false, true, t, t, hd, Scale(s), q, 3 * c, hd,
                                          q + c, 3 * c, hd, 0.0f, workspace, t, tt, g, stream));
      LOOM_RETURN_IF_ERROR(
          CausalSoftmaxRows(workspace, lse + (b * s.heads + h0) * t, g * t, t, stream));
      LOOM_RETURN_IF_ERROR(GemmF32Batched(handle, false, false, t, hd, t, 1.0f, workspace, t, tt,
                                          q + 2 * c, 3 * c, hd, 0.0f, out + b * t * c + h0 * hd, c,
                                          hd, g, stream));
    }
  }
  return Status::Ok();
}

Status AttentionBackwardGemm(GemmHandle& handle, float* dqkv, const float* dout, const float* qkv,
                             const float* out, const float* lse, const AttentionShape& s,
                             float* workspace, int64_t workspace_floats, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckShape(s, "AttentionBackwardGemm"));
  if (s.batch == 0 || s.seq == 0 || s.heads == 0) return Status::Ok();
  const int64_t group = AttentionGemmHeadsPerPass(s, workspace_floats, true);
  if (group == 0) return NoRoom(s, workspace_floats, true, "AttentionBackwardGemm");
  const int64_t t = s.seq, hd = s.head_dim, c = s.heads * hd, tt = t * t;
  float* p = workspace;                // scores, then probabilities: [group, T, T]
  float* ds = workspace + group * tt;  // dP, then dS
  const float scale = Scale(s);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h0 = 0; h0 < s.heads; h0 += group) {
      const int64_t g = std::min(group, s.heads - h0);
      const float* q = qkv + b * t * 3 * c + h0 * hd;
      const float* k = q + c;
      const float* v = q + 2 * c;
      const float* go = dout + b * t * c + h0 * hd;
      const float* o = out + b * t * c + h0 * hd;
      float* dq = dqkv + b * t * 3 * c + h0 * hd;
      LOOM_RETURN_IF_ERROR(GemmF32Batched(handle, false, true, t, t, hd, scale, q, 3 * c, hd, k,
                                          3 * c, hd, 0.0f, p, t, tt, g, stream));
      LOOM_RETURN_IF_ERROR(GemmF32Batched(handle, false, true, t, t, hd, 1.0f, go, c, hd, v, 3 * c,
                                          hd, 0.0f, ds, t, tt, g, stream));
      LOOM_RETURN_IF_ERROR(
          AttentionScoresGrad(p, ds, lse + (b * s.heads + h0) * t, go, o, c, hd, g * t, t, stream));
      // dV = P^T dO, dQ = scale * dS K, dK = scale * dS^T Q: every column of dqkv written once.
      LOOM_RETURN_IF_ERROR(GemmF32Batched(handle, true, false, t, hd, t, 1.0f, p, t, tt, go, c, hd,
                                          0.0f, dq + 2 * c, 3 * c, hd, g, stream));
      LOOM_RETURN_IF_ERROR(GemmF32Batched(handle, false, false, t, hd, t, scale, ds, t, tt, k,
                                          3 * c, hd, 0.0f, dq, 3 * c, hd, g, stream));
      LOOM_RETURN_IF_ERROR(GemmF32Batched(handle, true, false, t, hd, t, scale, ds, t, tt, q, 3 * c,
                                          hd, 0.0f, dq + c, 3 * c, hd, g, stream));
    }
  }
  return Status::Ok();
}

}  // namespace loom::cuda
