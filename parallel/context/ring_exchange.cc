// Ring attention's K/V exchange around the context-parallel group.
#include "parallel/context/ring_exchange.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "parallel/context/ring_attention.h"
#include "parallel/message_tags.h"

namespace loom {

Status RingAttentionExchange::Forward(const RingShape& s, const float* qkv, float* out,
                                      float* lse) {
  const int cp = cp_.size(), r = cp_.rank();
  const ContextSplit split{s.rows * cp, cp};
  const int64_t kvn = s.batch * s.rows * 2 * s.kv_width();
  kv_a_.resize(static_cast<size_t>(kvn));
  kv_b_.resize(static_cast<size_t>(kvn));
  PackKeyValue(qkv, kv_a_.data(), s.batch, s.rows, s.width(), s.kv_width());
  RingAttention<float> ring(split, r, s.batch, s.heads, s.head_dim, s.block_q, s.block_k,
                            s.kv_heads);
  ring.ForwardBegin();
  float* cur = kv_a_.data();
  float* next = kv_b_.data();
  for (int step = 0; step < cp; ++step) {
    std::vector<HandlePtr> kv;  // every rank receives, then sends: one exchange (communicator.h)
    if (step + 1 < cp) {
      kv = cp_.comm->ExchangeAsync(
          {P2PCall::Recv(CommBuffer::Host(next, kvn), (r + cp - 1) % cp, RingForwardTag(step)),
           P2PCall::Send(ConstCommBuffer::Host(cur, kvn), (r + 1) % cp, RingForwardTag(step))});
    }
    ring.ForwardStep(qkv, cur, (r - step + cp) % cp);
    if (!kv.empty()) {
      LOOM_RETURN_IF_ERROR(WaitAll(kv, cp_.comm->DefaultDeadline()));
      std::swap(cur, next);
    }
  }
  ring.ForwardEnd(out, lse);
  return Status::Ok();
}

Status RingAttentionExchange::Backward(const RingShape& s, const float* qkv, const float* out,
                                       const float* lse, const float* dout, float* dqkv) {
  const int cp = cp_.size(), r = cp_.rank();
  const ContextSplit split{s.rows * cp, cp};
  const int64_t c = s.width(), kc = s.kv_width(), kvn = s.batch * s.rows * 2 * kc;
  for (auto* v : {&kv_a_, &kv_b_, &dkv_a_, &dkv_b_}) v->assign(static_cast<size_t>(kvn), 0.0f);
  PackKeyValue(qkv, kv_a_.data(), s.batch, s.rows, c, kc);
  RingAttention<float> ring(split, r, s.batch, s.heads, s.head_dim, s.block_q, s.block_k,
                            s.kv_heads);
  ring.BackwardBegin(dout, out, dqkv);
  float *kv = kv_a_.data(), *kv_next = kv_b_.data();
  float *dkv = dkv_a_.data(), *dkv_next = dkv_b_.data();
  const int prev = (r + cp - 1) % cp, next = (r + 1) % cp;
  auto deadline = [&] { return cp_.comm->DefaultDeadline(); };
  for (int step = 0; step < cp; ++step) {
    std::vector<HandlePtr> kv_moves;
    if (step + 1 < cp) {  // the K/V of the next step travel while this step computes
      kv_moves = cp_.comm->ExchangeAsync(
          {P2PCall::Recv(CommBuffer::Host(kv_next, kvn), prev, RingBackwardKvTag(step)),
           P2PCall::Send(ConstCommBuffer::Host(kv, kvn), next, RingBackwardKvTag(step))});
    }
    ring.BackwardStep(qkv, kv, (r - step + cp) % cp, dout, lse, dqkv, dkv);
    // The accumulated dK/dV follows its K/V (after the last step: one hop home to its owner).
    LOOM_RETURN_IF_ERROR(WaitAll(
        cp_.comm->ExchangeAsync(
            {P2PCall::Recv(CommBuffer::Host(dkv_next, kvn), prev, RingBackwardGradTag(step)),
             P2PCall::Send(ConstCommBuffer::Host(dkv, kvn), next, RingBackwardGradTag(step))}),
        deadline()));
    std::swap(dkv, dkv_next);
    if (!kv_moves.empty()) {
      LOOM_RETURN_IF_ERROR(WaitAll(kv_moves, deadline()));
      std::swap(kv, kv_next);
    }
  }
  // dkv now holds this rank's own dK/dV: the k and v parts of dqkv.
  const int64_t rows = s.batch * s.rows;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    std::copy(dkv + i * 2 * kc, dkv + (i + 1) * 2 * kc, dqkv + i * (c + 2 * kc) + c);
  }
  return Status::Ok();
}

}  // namespace loom
