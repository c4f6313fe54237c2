// bfloat16 array conversions (the compiler vectorises the loops) and the oneDNN GEMM.
#include "core/kernels/bf16.h"

#include <string>

#include "core/half.h"

#ifdef LOOM_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace loom {

void CastToBf16(const float* in, Bf16* out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > (int64_t{1} << 15))
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToBf16(in[i]);
}

void CastFromBf16(const Bf16* in, float* out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > (int64_t{1} << 15))
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(in[i]);
}

#ifdef LOOM_HAVE_DNNL

bool HaveBf16Gemm() {
  return true;
}

Status GemmBf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const Bf16* a,
                int64_t lda, const Bf16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return Status::Ok();
  if (beta != 0.0f && beta != 1.0f) {
    return InvalidArgument("GemmBf16: beta must be 0 or 1, got " + std::to_string(beta));
  }
  using dt = dnnl::memory::data_type;
  try {
    // One engine and stream per thread (oneDNN keeps created primitives in its own cache).
    thread_local dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    thread_local dnnl::stream stream(engine);
    const dnnl::memory::desc ad({m, k}, dt::bf16,
                                trans_a ? dnnl::memory::dims{1, lda} : dnnl::memory::dims{lda, 1});
    const dnnl::memory::desc bd({k, n}, dt::bf16,
                                trans_b ? dnnl::memory::dims{1, ldb} : dnnl::memory::dims{ldb, 1});
    const dnnl::memory::desc cd({m, n}, dt::f32, dnnl::memory::dims{ldc, 1});
    dnnl::primitive_attr attr;
    if (beta == 1.0f) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr, engine);
    dnnl::matmul(pd).execute(stream,
                             {{DNNL_ARG_SRC, dnnl::memory(ad, engine, const_cast<Bf16*>(a))},
                              {DNNL_ARG_WEIGHTS, dnnl::memory(bd, engine, const_cast<Bf16*>(b))},
                              {DNNL_ARG_DST, dnnl::memory(cd, engine, c)}});
    stream.wait();
  } catch (const dnnl::error& e) {
    return Internal("GemmBf16 (" + std::to_string(m) + " x " + std::to_string(n) + " x " +
                    std::to_string(k) + "): oneDNN: " + e.what());
  }
  return Status::Ok();
}

#else

bool HaveBf16Gemm() {
  return false;
}

Status GemmBf16(bool, bool, int64_t, int64_t, int64_t, const Bf16*, int64_t, const Bf16*, int64_t,
                float, float*, int64_t) {
  return Unimplemented("bf16 GEMMs need oneDNN (Debian's libdnnl-dev; deploy/install-deps.sh)");
}

#endif

}  // namespace loom
