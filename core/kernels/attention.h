// Causal self-attention computed block by block with an online softmax (running max m and sum l
// per query row), FlashAttention-2 style: the [T,T] score matrix is never materialised; the
// forward keeps only the output and the log-sum-exp per row, and the backward recomputes scores.
//
// The block routines are the unit of work: one block of queries against one block of keys and
// values of a single head, with global positions, so the same code serves ring attention (key and
// value blocks arriving from other ranks) and the local full attention below.
//
// Layout of the full kernels: qkv is [B, T, 3C] with q | k | v, head h in columns h*hd..(h+1)*hd-1
// of each part (the output of the QKV linear); out is [B, T, C]; lse is [B, H, T].
#pragma once

#include <cstdint>

namespace loom {

// Rows of one head: row i lives at ptr + i * ld and has global position pos0 + i.
template <typename T>
struct HeadRows {
  T* ptr = nullptr;
  int64_t ld = 0;
  int64_t rows = 0;
  int64_t pos0 = 0;
};

// True when causal masking hides every key of `k` from every query of `q` (skip the block).
inline bool BlockFullyMasked(int64_t q_pos0, int64_t q_rows, int64_t k_pos0) {
  return k_pos0 > q_pos0 + q_rows - 1;
}

// Online-softmax state of a block of query rows: m[rows], l[rows], acc[rows, hd] (ld_acc).
// Initialise with AttentionStateInit before the first key block.
template <typename T>
void AttentionStateInit(T* m, T* l, T* acc, int64_t rows, int64_t hd, int64_t ld_acc);

// Folds one key/value block into the state. scratch: rows * k.rows elements.
template <typename T>
void AttentionBlockForward(HeadRows<const T> q, HeadRows<const T> k, HeadRows<const T> v,
                           int64_t hd, T scale, bool causal, T* m, T* l, T* acc, int64_t ld_acc,
                           T* scratch);

// out = acc / l and lse = m + log(l) for every row (out rows use q's layout: ld_out).
template <typename T>
void AttentionStateFinalize(T* out, int64_t ld_out, T* lse, const T* m, const T* l, const T* acc,
                            int64_t rows, int64_t hd, int64_t ld_acc);

// Gradient contribution of one (query block, key block) pair. `dout` rows follow q, `lse` and
// `delta` (= rowsum(dout * out)) are per query row. dq, dk, dv are accumulated (+=).
// scratch: 2 * q.rows * k.rows elements.
template <typename T>
void AttentionBlockBackward(HeadRows<const T> q, HeadRows<const T> k, HeadRows<const T> v,
                            HeadRows<const T> dout, const T* lse, const T* delta, int64_t hd,
                            T scale, bool causal, HeadRows<T> dq, HeadRows<T> dk, HeadRows<T> dv,
                            T* scratch);

struct AttentionShape {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t block_q = 64;   // query rows per block
  int64_t block_k = 256;  // key/value rows per block (larger blocks mean larger, faster GEMMs)
};

template <typename T>
void AttentionForward(T* out, T* lse, const T* qkv, const AttentionShape& s);

// dqkv is overwritten.
template <typename T>
void AttentionBackward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                       const AttentionShape& s);

}  // namespace loom
