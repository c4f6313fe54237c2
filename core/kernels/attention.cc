// Block attention kernels. Scores of a block pair are two small GEMMs on the calling thread; the
// full kernels run (batch, head, query block) tasks on the OpenMP pool.
#include "core/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/kernels/blas.h"
#include "core/kernels/fast_math.h"

namespace loom {
namespace {

// Number of keys of block k visible to query row at global position qpos.
inline int64_t VisibleKeys(bool causal, int64_t qpos, int64_t k_pos0, int64_t k_rows) {
  if (!causal) return k_rows;
  return std::clamp<int64_t>(qpos - k_pos0 + 1, 0, k_rows);
}

}  // namespace

template <typename T>
void AttentionStateInit(T* m, T* l, T* acc, int64_t rows, int64_t hd, int64_t ld_acc) {
  for (int64_t i = 0; i < rows; ++i) {
    m[i] = -std::numeric_limits<T>::infinity();
    l[i] = T(0);
    std::fill(acc + i * ld_acc, acc + i * ld_acc + hd, T(0));
  }
}

template <typename T>
void AttentionBlockForward(HeadRows<const T> q, HeadRows<const T> k, HeadRows<const T> v,
                           int64_t hd, T scale, bool causal, T* m, T* l, T* acc, int64_t ld_acc,
                           T* scratch) {
  if (causal && BlockFullyMasked(q.pos0, q.rows, k.pos0)) return;
  const int64_t tk = k.rows;
  T* s = scratch;
  Gemm<T>(false, true, q.rows, tk, hd, scale, q.ptr, q.ld, k.ptr, k.ld, T(0), s, tk);
  for (int64_t i = 0; i < q.rows; ++i) {
    T* row = s + i * tk;
    const int64_t valid = VisibleKeys(causal, q.pos0 + i, k.pos0, tk);
    if (valid == 0) {
      std::fill(row, row + tk, T(0));
      continue;
    }
    T mx = m[i];
    for (int64_t j = 0; j < valid; ++j) mx = std::max(mx, row[j]);
    const T corr = FastExp(m[i] - mx);  // m[i] == -inf on the first block: corr == 0
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < valid; ++j) {
      T p = FastExp(row[j] - mx);
      row[j] = p;
      sum += p;
    }
    std::fill(row + valid, row + tk, T(0));
    l[i] = l[i] * corr + sum;
    m[i] = mx;
    if (corr != T(1)) {
      T* a = acc + i * ld_acc;
      for (int64_t d = 0; d < hd; ++d) a[d] *= corr;
    }
  }
  Gemm<T>(false, false, q.rows, hd, tk, T(1), s, tk, v.ptr, v.ld, T(1), acc, ld_acc);
}

template <typename T>
void AttentionStateFinalize(T* out, int64_t ld_out, T* lse, const T* m, const T* l, const T* acc,
                            int64_t rows, int64_t hd, int64_t ld_acc) {
  for (int64_t i = 0; i < rows; ++i) {
    const T inv = l[i] > T(0) ? T(1) / l[i] : T(0);
    for (int64_t d = 0; d < hd; ++d) out[i * ld_out + d] = acc[i * ld_acc + d] * inv;
    lse[i] = l[i] > T(0) ? m[i] + std::log(l[i]) : -std::numeric_limits<T>::infinity();
  }
}

template <typename T>
void AttentionBlockBackward(HeadRows<const T> q, HeadRows<const T> k, HeadRows<const T> v,
                            HeadRows<const T> dout, const T* lse, const T* delta, int64_t hd,
                            T scale, bool causal, HeadRows<T> dq, HeadRows<T> dk, HeadRows<T> dv,
                            T* scratch) {
  if (causal && BlockFullyMasked(q.pos0, q.rows, k.pos0)) return;
  const int64_t tq = q.rows, tk = k.rows;
  T* p = scratch;
  T* dp = scratch + tq * tk;
  Gemm<T>(false, true, tq, tk, hd, scale, q.ptr, q.ld, k.ptr, k.ld, T(0), p, tk);
  for (int64_t i = 0; i < tq; ++i) {
    T* row = p + i * tk;
    const int64_t valid = VisibleKeys(causal, q.pos0 + i, k.pos0, tk);
    const T li = lse[i];
#pragma omp simd
    for (int64_t j = 0; j < valid; ++j) row[j] = FastExp(row[j] - li);
    std::fill(row + valid, row + tk, T(0));
  }
  // dV += P^T dO;  dP = dO V^T;  dS = P * (dP - delta);  dQ += scale dS K;  dK += scale dS^T Q
  Gemm<T>(true, false, tk, hd, tq, T(1), p, tk, dout.ptr, dout.ld, T(1), dv.ptr, dv.ld);
  Gemm<T>(false, true, tq, tk, hd, T(1), dout.ptr, dout.ld, v.ptr, v.ld, T(0), dp, tk);
  for (int64_t i = 0; i < tq; ++i) {
    T* prow = p + i * tk;
    const T* dprow = dp + i * tk;
    const T di = delta[i];
#pragma omp simd
    for (int64_t j = 0; j < tk; ++j) prow[j] = prow[j] * (dprow[j] - di);
  }
  Gemm<T>(false, false, tq, hd, tk, scale, p, tk, k.ptr, k.ld, T(1), dq.ptr, dq.ld);
  Gemm<T>(true, false, tk, hd, tq, scale, p, tk, q.ptr, q.ld, T(1), dk.ptr, dk.ld);
}

template <typename T>
void AttentionForward(T* out, T* lse, const T* qkv, const AttentionShape& s) {
  const int64_t c = s.heads * s.head_dim, hd = s.head_dim, bq = s.block_q, bk = s.block_k;
  const int64_t t = s.seq, nblocks = (t + bq - 1) / bq;
  const T scale = T(1) / std::sqrt(T(hd));
  const int64_t tasks = s.batch * s.heads * nblocks;
#pragma omp parallel
  {
    std::vector<T> m(bq), l(bq), acc(bq * hd), scratch(bq * bk);
    // Later query blocks see more keys: hand them out first so the tail is short.
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t qb = nblocks - 1 - task % nblocks;
      const int64_t h = (task / nblocks) % s.heads;
      const int64_t b = task / (nblocks * s.heads);
      const T* base = qkv + b * t * 3 * c + h * hd;
      const int64_t q0 = qb * bq, tq = std::min(bq, t - q0);
      HeadRows<const T> q{base + q0 * 3 * c, 3 * c, tq, q0};
      AttentionStateInit(m.data(), l.data(), acc.data(), tq, hd, hd);
      for (int64_t k0 = 0; k0 < q0 + tq; k0 += bk) {  // key blocks at or before the diagonal
        const int64_t tk = std::min(bk, q0 + tq - k0);
        HeadRows<const T> k{base + c + k0 * 3 * c, 3 * c, tk, k0};
        HeadRows<const T> v{base + 2 * c + k0 * 3 * c, 3 * c, tk, k0};
        AttentionBlockForward(q, k, v, hd, scale, true, m.data(), l.data(), acc.data(), hd,
                              scratch.data());
      }
      AttentionStateFinalize(out + (b * t + q0) * c + h * hd, c, lse + (b * s.heads + h) * t + q0,
                             m.data(), l.data(), acc.data(), tq, hd, hd);
    }
  }
}

template <typename T>
void AttentionBackward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                       const AttentionShape& s) {
  const int64_t c = s.heads * s.head_dim, hd = s.head_dim, bq = s.block_q, bk = s.block_k;
  const int64_t t = s.seq, nblocks = (t + bq - 1) / bq;
  const T scale = T(1) / std::sqrt(T(hd));
#pragma omp parallel
  {
    std::vector<T> delta(t), scratch(2 * bq * bk);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < s.batch * s.heads; ++task) {
      const int64_t h = task % s.heads, b = task / s.heads;
      const T* base = qkv + b * t * 3 * c + h * hd;
      T* dbase = dqkv + b * t * 3 * c + h * hd;
      const T* ob = out + b * t * c + h * hd;
      const T* gb = dout + b * t * c + h * hd;
      const T* lb = lse + (b * s.heads + h) * t;
      for (int64_t i = 0; i < t; ++i) {
        T d = 0;
        for (int64_t j = 0; j < hd; ++j) d += gb[i * c + j] * ob[i * c + j];
        delta[i] = d;
        for (int64_t part = 0; part < 3; ++part) {
          std::fill(dbase + i * 3 * c + part * c, dbase + i * 3 * c + part * c + hd, T(0));
        }
      }
      for (int64_t qb = 0; qb < nblocks; ++qb) {
        const int64_t q0 = qb * bq, tq = std::min(bq, t - q0);
        HeadRows<const T> q{base + q0 * 3 * c, 3 * c, tq, q0};
        HeadRows<const T> g{gb + q0 * c, c, tq, q0};
        HeadRows<T> dq{dbase + q0 * 3 * c, 3 * c, tq, q0};
        for (int64_t k0 = 0; k0 < q0 + tq; k0 += bk) {
          const int64_t tk = std::min(bk, q0 + tq - k0);
          HeadRows<const T> k{base + c + k0 * 3 * c, 3 * c, tk, k0};
          HeadRows<const T> v{base + 2 * c + k0 * 3 * c, 3 * c, tk, k0};
          HeadRows<T> dk{dbase + c + k0 * 3 * c, 3 * c, tk, k0};
          HeadRows<T> dv{dbase + 2 * c + k0 * 3 * c, 3 * c, tk, k0};
          AttentionBlockBackward(q, k, v, g, lb + q0, delta.data() + q0, hd, scale, true, dq, dk,
                                 dv, scratch.data());
        }
      }
    }
  }
}

#define LOOM_INSTANTIATE_ATTENTION(T)                                                              \
  template void AttentionStateInit<T>(T*, T*, T*, int64_t, int64_t, int64_t);                      \
  template void AttentionBlockForward<T>(HeadRows<const T>, HeadRows<const T>, HeadRows<const T>,  \
                                         int64_t, T, bool, T*, T*, T*, int64_t, T*);               \
  template void AttentionStateFinalize<T>(T*, int64_t, T*, const T*, const T*, const T*, int64_t,  \
                                          int64_t, int64_t);                                       \
  template void AttentionBlockBackward<T>(HeadRows<const T>, HeadRows<const T>, HeadRows<const T>, \
                                          HeadRows<const T>, const T*, const T*, int64_t, T, bool, \
                                          HeadRows<T>, HeadRows<T>, HeadRows<T>, T*);              \
  template void AttentionForward<T>(T*, T*, const T*, const AttentionShape&);                      \
  template void AttentionBackward<T>(T*, const T*, const T*, const T*, const T*,                   \
                                     const AttentionShape&);
LOOM_INSTANTIATE_ATTENTION(float)
LOOM_INSTANTIATE_ATTENTION(double)

}  // namespace loom
