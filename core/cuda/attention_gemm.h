// Causal attention through cuBLASLt GEMMs: the scores of a group of heads, [heads, T, T] fp32, are
// formed in a workspace by one batched GEMM, turned into probabilities by a row kernel and
// multiplied by V by another; the backward recomputes them from lse (no [T, T] is kept between
// forward and backward). The same contract and results as kernels.h's AttentionForward and
// AttentionBackward (qkv [B, T, 3, H, hd], out [B, T, H * hd], lse [B, H, T], dqkv overwritten),
// to fp32 rounding: everything is fp32 (TF32 only if the handle allows it).
//
// Why both: the flash-style kernels of attention.cu keep O(T) memory but run on CUDA cores at a
// few TFLOP/s; here the products run at the GEMM library's rate (they also compute the masked
// upper triangle, twice the causal work) at the price of heads * T * T floats of workspace. A
// caller picks this path when its workspace holds at least one head (AttentionGemmHeadsPerPass)
// and the flash kernels otherwise (long sequences).
//
// Needs no CUDA header. Asynchronous on `stream`; `handle` must not be used concurrently.
#pragma once

#include <cstdint>

#include "core/cuda/gemm.h"
#include "core/cuda/stream.h"
#include "core/kernels/attention.h"  // AttentionShape
#include "core/status.h"

namespace loom::cuda {

// Heads whose scores fit in `workspace_floats` at once: the forward needs T * T floats a head, the
// backward 2 * T * T (scores and their gradient). 0 when not even one head fits; at most s.heads.
int64_t AttentionGemmHeadsPerPass(const AttentionShape& s, int64_t workspace_floats, bool backward);

// out, lse from qkv. InvalidArgument when the workspace holds no head.
Status AttentionForwardGemm(GemmHandle& handle, float* out, float* lse, const float* qkv,
                            const AttentionShape& s, float* workspace, int64_t workspace_floats,
                            Stream stream = nullptr);

// dqkv (overwritten) from dout, the forward's qkv, out and lse. InvalidArgument when the
// workspace holds no head.
Status AttentionBackwardGemm(GemmHandle& handle, float* dqkv, const float* dout, const float* qkv,
                             const float* out, const float* lse, const AttentionShape& s,
                             float* workspace, int64_t workspace_floats, Stream stream = nullptr);

// The two row kernels, over `rows` = heads * T rows of T scores each (row r: head r / T, query
// i = r % T; rows contiguous, row stride T):
// scores (scaled) -> probabilities in place, P[i, j] = exp(S[i, j] - lse_r) for j <= i and 0 for
// j > i, with lse[r] = log(sum over j <= i of exp(S[i, j])) written.
Status CausalSoftmaxRows(float* scores, float* lse, int64_t rows, int64_t t,
                         Stream stream = nullptr);
// scores (scaled) -> P in place (from lse, as above) and dp -> dS = P * (dP - delta) in place,
// delta_r = sum over d of dout[i, d] * out[i, d] for the row's head (dout and out: the group's
// first head at column 0, row stride ld, head h at column h * hd).
Status AttentionScoresGrad(float* scores, float* dp, const float* lse, const float* dout,
                           const float* out, int64_t ld, int64_t hd, int64_t rows, int64_t t,
                           Stream stream = nullptr);

}  // namespace loom::cuda
