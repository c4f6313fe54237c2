// Internal to core/cuda/: warp and block reductions shared by the row kernels (layernorm,
// cross-entropy, norm). Every thread of the warp (block) must call them; all receive the result.
#pragma once

namespace loom::cuda::internal {

template <typename T>
__device__ __forceinline__ T WarpSum(T v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Block-wide reduction through 32 slots of shared memory; blockDim.x must be a multiple of 32 (at
// most 1024). `scratch` is reused: the leading __syncthreads protects it from a previous call.
template <typename T, typename Op>
__device__ T BlockReduce(T v, Op op, T identity, T* scratch /* [32] shared */) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  __syncthreads();  // a previous BlockReduce may still be reading scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : identity;
  for (int off = 16; off > 0; off >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;  // every warp reduced the same 32 slots: all threads hold the total
}

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

}  // namespace loom::cuda::internal
