// Ring attention's transport: how the K/V blocks (and, in the backward, their gradients) travel
// around the context-parallel group while parallel/context/ring_attention.h folds them in.
//
// Forward: each rank packs its K/V and, for cp steps, sends the block it holds to rank + 1 and
// receives the next from rank - 1 asynchronously, while the block already held is computed, so
// the transfer of step s + 1 overlaps the compute of step s. Backward: K/V travel the same way,
// and the dK/dV accumulators follow their K/V; after cp steps each has visited every rank and the
// last hop returns it to its owner. Tags come from parallel/message_tags.h.
//
// Blocking per call (every wait has the group's default deadline). Not thread-safe. The exchange
// owns the travelling buffers; they stay allocated between calls (resized to the largest block).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"

namespace loom {

// The context-parallel group of a rank: the sequence is split over `comm` with the load-balanced
// causal split (ContextSplit); each rank holds seq / cp tokens of every sequence.
struct ContextParallel {
  Communicator* comm = nullptr;  // null: cp = 1
  int size() const { return comm ? comm->size() : 1; }
  int rank() const { return comm ? comm->rank() : 0; }
};

// One micro-batch of `batch` sequences of `rows` local rows (seq / cp) and `heads` heads of
// `head_dim` (this rank's tensor-parallel heads), with the attention kernel's block sizes;
// kv_heads (0: = heads) K/V heads for grouped-query attention (ring_attention.h).
struct RingShape {
  int64_t batch = 0, rows = 0, heads = 0, head_dim = 0, block_q = 64, block_k = 256, kv_heads = 0;
  int64_t width() const { return heads * head_dim; }  // C: of q, and of the output
  int64_t kv_width() const { return (kv_heads > 0 ? kv_heads : heads) * head_dim; }  // K
};

class RingAttentionExchange {
 public:
  explicit RingAttentionExchange(ContextParallel cp) : cp_(cp) {}

  // out [batch, rows, C] and lse [batch, heads, rows] of causal attention of this rank's queries
  // over the whole sequence; qkv [batch, rows, C + 2K] is this rank's (q | k | v). Only the
  // K/V heads travel: [batch, rows, 2K] a hop.
  Status Forward(const RingShape& s, const float* qkv, float* out, float* lse);
  // dqkv [batch, rows, C + 2K] (overwritten) from dout and the forward's out and lse.
  Status Backward(const RingShape& s, const float* qkv, const float* out, const float* lse,
                  const float* dout, float* dqkv);

 private:
  ContextParallel cp_;
  std::vector<float> kv_a_, kv_b_, dkv_a_, dkv_b_;  // travelling blocks [batch, rows, 2K]
};

}  // namespace loom
