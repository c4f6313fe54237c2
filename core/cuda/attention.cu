// Causal self-attention, fp32, FlashAttention-2 style: scores are formed one key tile at a time
// and folded into an online softmax, so [T, T] never exists in memory.
//
// Thread layout shared by both kernels: a block of kWarps warps; a key tile holds kTile = 32 keys,
// one per lane, so a warp computes the 32 scores of one query row at once (lane j: key j) and the
// softmax statistics of the row are warp reductions. For the products with V (and K, Q, dO in the
// backward) a lane owns the head dimensions d = lane, lane + 32, ... (at most kMaxDPerLane).
//
// Forward: a block per (query tile of kWarps rows, head, batch); warp w owns query row q0 + w and
// walks the key tiles up to the diagonal, K and V tiles staged in shared memory.
// Backward: a block per (key tile, head, batch), which owns dK and dV of its 32 keys (summed in
// shared memory, then stored: every key row belongs to exactly one block) and walks the query rows
// at or after the tile; dQ rows are summed across key tiles with global atomicAdd into dqkv, which
// is zeroed first. delta = rowsum(dO * O) is recomputed per (query row, key tile): no scratch.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "core/cuda/check.h"
#include "core/cuda/kernels.h"
#include "core/cuda/reduce.cuh"

namespace loom::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTile = 32;  // keys per tile: one per lane
constexpr int kMaxDPerLane = static_cast<int>(kMaxAttentionHeadDim / 32);

struct Dims {
  int64_t t;  // sequence length
  int64_t h;  // heads
  int hd;     // head dimension
  int64_t c;  // channels = h * hd
};

// ---------------------------------------------------------------- kernels
// Shared memory (floats): ks[kTile][hd + 1] | vs[kTile][hd] | qs[kWarps][hd]. K rows are padded by
// one so that the 32 lanes reading ks[lane][d] hit different banks.
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(float* out, float* lse, const float* qkv, Dims dims, float scale) {
  extern __shared__ float smem[];
  const int hd = dims.hd, ldk = hd + 1;
  float* ks = smem;
  float* vs = ks + kTile * ldk;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* q = vs + kTile * hd + warp * hd;

  const int64_t t = dims.t, c = dims.c, ld = 3 * c;
  const int64_t head = blockIdx.y, batch = blockIdx.z;
  const float* base = qkv + batch * t * ld + head * hd;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kWarps;
  const int64_t qpos = q0 + warp;
  const bool row_valid = qpos < t;  // the last query tile may be partial
  const int64_t last_q = (q0 + kWarps < t ? q0 + kWarps : t) - 1;

  for (int d = lane; d < hd; d += 32) q[d] = row_valid ? base[qpos * ld + d] : 0.0f;
  __syncwarp();

  float m = -INFINITY, l = 0.0f;
  float acc[kMaxDPerLane];
#pragma unroll
  for (int u = 0; u < kMaxDPerLane; ++u) acc[u] = 0.0f;

  for (int64_t k0 = 0; k0 <= last_q; k0 += kTile) {
    __syncthreads();  // every warp is done with the previous tile
    for (int e = threadIdx.x; e < kTile * hd; e += kThreads) {
      const int j = e / hd, d = e - j * hd;
      const int64_t kpos = k0 + j;
      // Rows past the sequence are zeros, never garbage: 0 * NaN would poison the accumulators.
      ks[j * ldk + d] = kpos < t ? base[kpos * ld + c + d] : 0.0f;
      vs[j * hd + d] = kpos < t ? base[kpos * ld + 2 * c + d] : 0.0f;
    }
    __syncthreads();
    if (!row_valid || k0 > qpos) continue;  // warp-uniform; no block barrier until the next tile

    const int64_t kpos = k0 + lane;
    const bool visible = kpos <= qpos;  // causal; implies kpos < t
    float s = -INFINITY;
    if (visible) {
      float dot = 0.0f;
      for (int d = 0; d < hd; ++d) dot += q[d] * ks[lane * ldk + d];
      s = dot * scale;
    }
    const float m_new = fmaxf(m, internal::WarpMax(s));  // finite: key k0 is visible
    const float corr = expf(m - m_new);                  // 0 on the first tile (m = -inf)
    const float p = visible ? expf(s - m_new) : 0.0f;
    l = l * corr + internal::WarpSum(p);
    m = m_new;
#pragma unroll
    for (int u = 0; u < kMaxDPerLane; ++u) acc[u] *= corr;
    for (int j = 0; j < kTile; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
      for (int u = 0; u < kMaxDPerLane; ++u) {
        const int d = lane + 32 * u;
        if (d < hd) acc[u] += pj * vs[j * hd + d];
      }
    }
  }

  if (!row_valid) return;
  const float inv = 1.0f / l;  // l >= 1: the row's maximum contributes exp(0)
  float* o = out + (batch * t + qpos) * c + head * hd;
#pragma unroll
  for (int u = 0; u < kMaxDPerLane; ++u) {
    const int d = lane + 32 * u;
    if (d < hd) o[d] = acc[u] * inv;
  }
  if (lane == 0) lse[(batch * dims.h + head) * t + qpos] = m + logf(l);
}

// Shared memory (floats): ks[kTile][hd + 1] | vs[kTile][hd + 1] | dks[kTile][hd] | dvs[kTile][hd]
// | qs[kWarps][hd] | dos[kWarps][hd].
__global__ void __launch_bounds__(kThreads)
    attention_backward_kernel(float* dqkv, const float* dout, const float* qkv, const float* out,
                              const float* lse, Dims dims, float scale) {
  extern __shared__ float smem[];
  const int hd = dims.hd, ldk = hd + 1;
  float* ks = smem;
  float* vs = ks + kTile * ldk;
  float* dks = vs + kTile * ldk;
  float* dvs = dks + kTile * hd;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* q = dvs + kTile * hd + warp * hd;
  float* g = q + kWarps * hd;  // this warp's dO row

  const int64_t t = dims.t, c = dims.c, ld = 3 * c;
  const int64_t head = blockIdx.y, batch = blockIdx.z;
  const float* base = qkv + batch * t * ld + head * hd;
  float* dbase = dqkv + batch * t * ld + head * hd;
  const float* obase = out + batch * t * c + head * hd;
  const float* gbase = dout + batch * t * c + head * hd;
  const float* lbase = lse + (batch * dims.h + head) * t;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kTile;

  for (int e = threadIdx.x; e < kTile * hd; e += kThreads) {
    const int j = e / hd, d = e - j * hd;
    const int64_t kpos = k0 + j;
    ks[j * ldk + d] = kpos < t ? base[kpos * ld + c + d] : 0.0f;
    vs[j * ldk + d] = kpos < t ? base[kpos * ld + 2 * c + d] : 0.0f;
    dks[j * hd + d] = 0.0f;
    dvs[j * hd + d] = 0.0f;
  }
  __syncthreads();

  const int64_t kpos = k0 + lane;  // this lane's key
  // Causal: only queries at or after the tile's first key see any of its keys.
  for (int64_t i0 = k0; i0 < t; i0 += kWarps) {
    const int64_t qpos = i0 + warp;
    if (qpos >= t) break;  // warp-uniform; no block barrier inside this loop
    __syncwarp();          // all lanes finished reading q and g of the previous row
    const float* grow = gbase + qpos * c;
    const float* orow = obase + qpos * c;
    float delta = 0.0f;
    for (int d = lane; d < hd; d += 32) {
      q[d] = base[qpos * ld + d];
      g[d] = grow[d];
      delta += grow[d] * orow[d];
    }
    delta = internal::WarpSum(delta);
    __syncwarp();  // q and g visible to every lane

    const bool visible = kpos <= qpos && kpos < t;
    float p = 0.0f, ds = 0.0f;
    if (visible) {
      float s = 0.0f, dp = 0.0f;
      for (int d = 0; d < hd; ++d) {
        s += q[d] * ks[lane * ldk + d];
        dp += g[d] * vs[lane * ldk + d];
      }
      p = expf(s * scale - lbase[qpos]);
      ds = p * (dp - delta);
    }

    float dq[kMaxDPerLane];
#pragma unroll
    for (int u = 0; u < kMaxDPerLane; ++u) dq[u] = 0.0f;
    for (int j = 0; j < kTile; ++j) {
      const float pj = __shfl_sync(0xffffffffu, p, j);
      const float dsj = __shfl_sync(0xffffffffu, ds, j);
      if (pj == 0.0f) continue;  // masked or underflowed key: ds is 0 as well (warp-uniform)
#pragma unroll
      for (int u = 0; u < kMaxDPerLane; ++u) {
        const int d = lane + 32 * u;
        if (d < hd) {
          dq[u] += dsj * ks[j * ldk + d];
          atomicAdd(dks + j * hd + d, scale * dsj * q[d]);  // the other warps add to this row
          atomicAdd(dvs + j * hd + d, pj * g[d]);
        }
      }
    }
    float* dqrow = dbase + qpos * ld;
#pragma unroll
    for (int u = 0; u < kMaxDPerLane; ++u) {
      const int d = lane + 32 * u;
      if (d < hd) atomicAdd(dqrow + d, scale * dq[u]);  // other key tiles add to this row
    }
  }
  __syncthreads();  // every warp's dK/dV contributions are in shared memory

  for (int e = threadIdx.x; e < kTile * hd; e += kThreads) {
    const int j = e / hd, d = e - j * hd;
    const int64_t kp = k0 + j;
    if (kp >= t) continue;
    dbase[kp * ld + c + d] = dks[j * hd + d];
    dbase[kp * ld + 2 * c + d] = dvs[j * hd + d];
  }
}

// ---------------------------------------------------------------- launchers
Status CheckShape(const AttentionShape& s, const char* what) {
  if (s.batch < 0 || s.seq < 0 || s.heads < 0 || s.head_dim <= 0 ||
      s.head_dim > kMaxAttentionHeadDim || s.batch > 65535 || s.heads > 65535) {
    return InvalidArgument(std::string(what) +
                           ": unsupported shape batch=" + std::to_string(s.batch) +
                           " seq=" + std::to_string(s.seq) + " heads=" + std::to_string(s.heads) +
                           " head_dim=" + std::to_string(s.head_dim) + " (head_dim at most " +
                           std::to_string(kMaxAttentionHeadDim) + ")");
  }
  return Status::Ok();
}

// Opts the kernel in to more than the default 48 KiB of dynamic shared memory when needed.
Status PrepareSharedMemory(const void* kernel, size_t bytes, const char* what) {
  if (bytes <= 48 * 1024) return Status::Ok();
  return internal::Check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(bytes)),
                         what);
}

Dims DimsOf(const AttentionShape& s) {
  return Dims{s.seq, s.heads, static_cast<int>(s.head_dim), s.heads * s.head_dim};
}

}  // namespace

Status AttentionForward(float* out, float* lse, const float* qkv, const AttentionShape& s,
                        Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckShape(s, "AttentionForward"));
  if (s.batch == 0 || s.seq == 0 || s.heads == 0) return Status::Ok();
  const int64_t hd = s.head_dim;
  const size_t smem =
      sizeof(float) * static_cast<size_t>(kTile * (hd + 1) + kTile * hd + kWarps * hd);
  LOOM_RETURN_IF_ERROR(PrepareSharedMemory(reinterpret_cast<const void*>(attention_forward_kernel),
                                           smem, "cudaFuncSetAttribute attention_forward_kernel"));
  const dim3 grid(static_cast<unsigned>((s.seq + kWarps - 1) / kWarps),
                  static_cast<unsigned>(s.heads), static_cast<unsigned>(s.batch));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  attention_forward_kernel<<<grid, kThreads, smem, stream>>>(out, lse, qkv, DimsOf(s), scale);
  return internal::CheckLaunch("attention_forward_kernel");
}

Status AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* out,
                         const float* lse, const AttentionShape& s, Stream stream) {
  LOOM_RETURN_IF_ERROR(CheckShape(s, "AttentionBackward"));
  if (s.batch == 0 || s.seq == 0 || s.heads == 0) return Status::Ok();
  const int64_t hd = s.head_dim;
  // dQ is summed with atomics; dK and dV are stored, but zeroing all of dqkv is simpler and cheap.
  const size_t dqkv_bytes = sizeof(float) * static_cast<size_t>(s.batch * s.seq * 3 * s.heads * hd);
  LOOM_RETURN_IF_ERROR(
      internal::Check(cudaMemsetAsync(dqkv, 0, dqkv_bytes, stream), "cudaMemsetAsync dqkv"));
  const size_t smem =
      sizeof(float) * static_cast<size_t>(2 * kTile * (hd + 1) + 2 * kTile * hd + 2 * kWarps * hd);
  LOOM_RETURN_IF_ERROR(PrepareSharedMemory(reinterpret_cast<const void*>(attention_backward_kernel),
                                           smem, "cudaFuncSetAttribute attention_backward_kernel"));
  const dim3 grid(static_cast<unsigned>((s.seq + kTile - 1) / kTile),
                  static_cast<unsigned>(s.heads), static_cast<unsigned>(s.batch));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  attention_backward_kernel<<<grid, kThreads, smem, stream>>>(dqkv, dout, qkv, out, lse, DimsOf(s),
                                                              scale);
  return internal::CheckLaunch("attention_backward_kernel");
}

}  // namespace loom::cuda
