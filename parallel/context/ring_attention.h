// Ring attention for context parallelism, the compute half: each of cp ranks holds its query rows
// of the load-balanced causal split and folds in the key/value rows of every rank as they arrive
// around the ring, merging partial results with the online softmax (log-sum-exp) of the block
// kernel in core/kernels/attention.h. Fully masked blocks are skipped by that kernel. The
// transport (who sends which K/V when) belongs to the runtime; this class only needs, at each
// step, the K/V rows of one source rank.
//
// Load-balanced split: the sequence is cut into 2*cp chunks; rank i holds chunk i and chunk
// 2*cp-1-i, so every rank does the same causal work. Local rows are [chunk i | chunk 2cp-1-i].
// Layouts (per micro-batch, C = heads * head_dim of this rank, K = kv_heads * head_dim): local qkv
// [B, Tl, C + 2K] (q | k | v), packed kv [B, Tl, 2K] (k | v), out [B, Tl, C], lse [B, H, Tl];
// Tl = 2 * seq / (2 * cp). Grouped-query attention: kv_heads divides heads, and query head h
// reads K/V head h / (heads / kv_heads), so only the KV heads travel (kv_heads = heads: GPT-2).
#pragma once

#include <cstdint>
#include <vector>

namespace loom {

struct ContextSplit {
  int64_t seq = 0;
  int cp = 1;
  int64_t chunk() const { return seq / (2 * cp); }
  int64_t local_rows() const { return 2 * chunk(); }
  // Global position of local row `row` on `rank`.
  int64_t Position(int rank, int64_t row) const {
    const int64_t c = chunk();
    return row < c ? rank * c + row : (2 * cp - 1 - rank) * c + (row - c);
  }
};

// Copies the k and v columns of a local qkv [B, Tl, C + 2K] into a packed [B, Tl, 2K] buffer
// (what travels); kvc = K (0: = c).
template <typename T>
void PackKeyValue(const T* qkv, T* kv, int64_t batch, int64_t rows, int64_t c, int64_t kvc = 0);

template <typename T>
class RingAttention {
 public:
  RingAttention(ContextSplit split, int rank, int64_t batch, int64_t heads, int64_t head_dim,
                int64_t block_q = 64, int64_t block_k = 256, int64_t kv_heads = 0);

  // Forward: Begin, then one Step per source rank (any order), then End.
  void ForwardBegin();
  void ForwardStep(const T* qkv, const T* kv, int src);
  void ForwardEnd(T* out, T* lse);

  // Backward: Begin (dout, out of the forward; dq parts of dqkv are zeroed), then one Step per
  // source rank adding to this rank's dq and to that source's packed dkv [B, Tl, 2K] (the buffer
  // that travels back to its owner). With fewer KV heads than heads, a step's dK/dV are computed
  // per query head into a scratch and summed over each group, so heads stay parallel.
  void BackwardBegin(const T* dout, const T* out, T* dqkv);
  void BackwardStep(const T* qkv, const T* kv, int src, const T* dout, const T* lse, T* dqkv,
                    T* dkv);

 private:
  // Calls fn(b, h, q_row0, q_rows, k_row0, k_rows) for every (query block, key block) pair of
  // this rank against `src`, in parallel over (b, h).
  template <typename Fn>
  void ForEachBlock(int src, Fn fn);

  ContextSplit split_;
  int rank_;
  int64_t batch_, heads_, hd_, bq_, bk_, rows_, c_;
  int64_t kvh_, kvc_, group_;  // KV heads, their width K, query heads per KV head
  std::vector<T> m_, l_, acc_, delta_;
  std::vector<T> dkv_heads_;  // grouped-query backward: per-query-head dK/dV [B, Tl, 2C]
};

}  // namespace loom
