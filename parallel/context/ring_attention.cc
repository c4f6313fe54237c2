// Ring attention over the block kernels.
#include "parallel/context/ring_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/kernels/attention.h"

namespace loom {

template <typename T>
void PackKeyValue(const T* qkv, T* kv, int64_t batch, int64_t rows, int64_t c, int64_t kvc) {
  if (kvc == 0) kvc = c;
  const int64_t w = c + 2 * kvc;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < batch * rows; ++i) {
    std::copy(qkv + i * w + c, qkv + (i + 1) * w, kv + i * 2 * kvc);
  }
}

template <typename T>
RingAttention<T>::RingAttention(ContextSplit split, int rank, int64_t batch, int64_t heads,
                                int64_t head_dim, int64_t block_q, int64_t block_k,
                                int64_t kv_heads)
    : split_(split),
      rank_(rank),
      batch_(batch),
      heads_(heads),
      hd_(head_dim),
      bq_(block_q),
      bk_(block_k),
      rows_(split.local_rows()),
      c_(heads * head_dim),
      kvh_(kv_heads > 0 ? kv_heads : heads),
      kvc_(kvh_ * head_dim),
      group_(heads / kvh_) {}

template <typename T>
template <typename Fn>
void RingAttention<T>::ForEachBlock(int /*src*/, Fn fn) {
  const int64_t chunk = split_.chunk();
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t task = 0; task < batch_ * heads_; ++task) {
    const int64_t b = task / heads_, h = task % heads_;
    for (int qc = 0; qc < 2; ++qc) {  // the two local query chunks
      for (int64_t q0 = qc * chunk; q0 < (qc + 1) * chunk; q0 += bq_) {
        const int64_t tq = std::min(bq_, (qc + 1) * chunk - q0);
        for (int kc = 0; kc < 2; ++kc) {  // the source's two key chunks
          for (int64_t k0 = kc * chunk; k0 < (kc + 1) * chunk; k0 += bk_) {
            fn(b, h, q0, tq, k0, std::min(bk_, (kc + 1) * chunk - k0));
          }
        }
      }
    }
  }
}

template <typename T>
void RingAttention<T>::ForwardBegin() {
  // The state AttentionStateInit would set: no key seen yet.
  m_.assign(static_cast<size_t>(batch_ * heads_ * rows_), -std::numeric_limits<T>::infinity());
  l_.assign(m_.size(), T(0));
  acc_.assign(static_cast<size_t>(batch_ * rows_ * c_), T(0));
}

template <typename T>
void RingAttention<T>::ForwardStep(const T* qkv, const T* kv, int src) {
  const T scale = T(1) / std::sqrt(T(hd_));
  const int64_t cq = c_ + 2 * kvc_, ckv = 2 * kvc_;
  ForEachBlock(src, [&](int64_t b, int64_t h, int64_t q0, int64_t tq, int64_t k0, int64_t tk) {
    thread_local std::vector<T> scratch;
    scratch.resize(static_cast<size_t>(bq_ * bk_));
    const int64_t g = h / group_;
    // Block rows are contiguous in position inside a chunk, so pos0 describes them all.
    HeadRows<const T> q{qkv + (b * rows_ + q0) * cq + h * hd_, cq, tq, split_.Position(rank_, q0)};
    HeadRows<const T> k{kv + (b * rows_ + k0) * ckv + g * hd_, ckv, tk, split_.Position(src, k0)};
    HeadRows<const T> v{kv + (b * rows_ + k0) * ckv + kvc_ + g * hd_, ckv, tk, k.pos0};
    const int64_t s = (b * heads_ + h) * rows_ + q0;
    AttentionBlockForward(q, k, v, hd_, scale, true, m_.data() + s, l_.data() + s,
                          acc_.data() + (b * rows_ + q0) * c_ + h * hd_, c_, scratch.data());
  });
}

template <typename T>
void RingAttention<T>::ForwardEnd(T* out, T* lse) {
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < batch_ * heads_; ++task) {
    const int64_t b = task / heads_, h = task % heads_, s = task * rows_;
    AttentionStateFinalize(out + b * rows_ * c_ + h * hd_, c_, lse + s, m_.data() + s,
                           l_.data() + s, acc_.data() + b * rows_ * c_ + h * hd_, rows_, hd_, c_);
  }
}

template <typename T>
void RingAttention<T>::BackwardBegin(const T* dout, const T* out, T* dqkv) {
  delta_.assign(static_cast<size_t>(batch_ * heads_ * rows_), T(0));
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < batch_ * heads_; ++task) {
    const int64_t b = task / heads_, h = task % heads_;
    for (int64_t i = 0; i < rows_; ++i) {
      const T* g = dout + (b * rows_ + i) * c_ + h * hd_;
      const T* o = out + (b * rows_ + i) * c_ + h * hd_;
      T d = 0;
      for (int64_t j = 0; j < hd_; ++j) d += g[j] * o[j];
      delta_[task * rows_ + i] = d;
      T* dq = dqkv + (b * rows_ + i) * (c_ + 2 * kvc_) + h * hd_;
      std::fill(dq, dq + hd_, T(0));
    }
  }
}

template <typename T>
void RingAttention<T>::BackwardStep(const T* qkv, const T* kv, int src, const T* dout, const T* lse,
                                    T* dqkv, T* dkv) {
  const T scale = T(1) / std::sqrt(T(hd_));
  const int64_t cq = c_ + 2 * kvc_, ckv = 2 * kvc_;
  // Query heads that share a KV head would add to the same dK/dV rows from different threads:
  // with groups, each head writes its own slot of a [B, Tl, 2C] scratch, summed below.
  const bool grouped = group_ > 1;
  if (grouped) dkv_heads_.assign(static_cast<size_t>(batch_ * rows_ * 2 * c_), T(0));
  T* dst = grouped ? dkv_heads_.data() : dkv;
  const int64_t cd = grouped ? 2 * c_ : ckv, vd = grouped ? c_ : kvc_;  // dst row width, v offset
  ForEachBlock(src, [&](int64_t b, int64_t h, int64_t q0, int64_t tq, int64_t k0, int64_t tk) {
    thread_local std::vector<T> scratch;
    scratch.resize(static_cast<size_t>(2 * bq_ * bk_));
    const int64_t qpos = split_.Position(rank_, q0), kpos = split_.Position(src, k0);
    const int64_t kvh = h / group_, dh = grouped ? h : kvh;
    HeadRows<const T> q{qkv + (b * rows_ + q0) * cq + h * hd_, cq, tq, qpos};
    HeadRows<const T> k{kv + (b * rows_ + k0) * ckv + kvh * hd_, ckv, tk, kpos};
    HeadRows<const T> v{kv + (b * rows_ + k0) * ckv + kvc_ + kvh * hd_, ckv, tk, kpos};
    HeadRows<const T> g{dout + (b * rows_ + q0) * c_ + h * hd_, c_, tq, qpos};
    HeadRows<T> dq{dqkv + (b * rows_ + q0) * cq + h * hd_, cq, tq, qpos};
    HeadRows<T> dk{dst + (b * rows_ + k0) * cd + dh * hd_, cd, tk, kpos};
    HeadRows<T> dv{dst + (b * rows_ + k0) * cd + vd + dh * hd_, cd, tk, kpos};
    const int64_t s = (b * heads_ + h) * rows_ + q0;
    AttentionBlockBackward(q, k, v, g, lse + s, delta_.data() + s, hd_, scale, true, dq, dk, dv,
                           scratch.data());
  });
  if (!grouped) return;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < batch_ * rows_; ++i) {
    const T* e = dkv_heads_.data() + i * 2 * c_;
    T* d = dkv + i * ckv;
    for (int64_t h = 0; h < heads_; ++h) {
      const int64_t kvh = h / group_;
      for (int64_t j = 0; j < hd_; ++j) {
        d[kvh * hd_ + j] += e[h * hd_ + j];
        d[kvc_ + kvh * hd_ + j] += e[c_ + h * hd_ + j];
      }
    }
  }
}

template void PackKeyValue<float>(const float*, float*, int64_t, int64_t, int64_t, int64_t);
template void PackKeyValue<double>(const double*, double*, int64_t, int64_t, int64_t, int64_t);
template class RingAttention<float>;
template class RingAttention<double>;

}  // namespace loom
