// The CUDA stream type without the CUDA headers: CPU-only translation units may include the public
// headers of core/cuda/ (device.h, kernels.h, gemm.h) without the toolkit's include directories.
// `Stream` is the same type as cudaStream_t; nullptr is the legacy default stream.
#pragma once

struct CUstream_st;  // cuda_runtime.h: typedef struct CUstream_st* cudaStream_t

namespace loom::cuda {

using Stream = CUstream_st*;

}  // namespace loom::cuda
