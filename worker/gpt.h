// The GPT model of one rank: explicit forward and backward per layer (no autograd, as in
// llm.c), of either family (model/config.h: GPT-2, or Llama's RMSNorm, SwiGLU, rotary positions,
// grouped-query attention and untied head, in worker/llama_layer.cc), composed of the parallel
// building blocks: Megatron tensor parallelism (parallel/tensor_parallel/: column-parallel QKV and
// FC, row-parallel projections, heads split, vocab-parallel embedding and cross-entropy whose
// logits are never gathered), sequence parallelism (LayerNorm/residual regions hold 1/tp of the
// tokens), ring attention under context parallelism (parallel/context/). With tp = cp = 1 it is the
// single-process model. Parameters and gradients live in a ParamStore (parallel/zero/, ZeRO 0-3).
//
// Activation plan, per layer and micro-batch of N = B*T tokens, Nl = N/tp with SP else N,
// C = hidden, Cl = C/tp, Fl = 4C/tp (floats; under bf16 the ln_1, ln_2 and gelu outputs are
// bf16; so are the head's GEMMs):
//   kept (recompute = none): ln_1 out N*C, LN stats 2Nl (x2 norms), qkv 3N*Cl, attention out
//     N*Cl, attention lse B*(H/tp)*T, residual after attention Nl*C, ln_2 out N*C, fc N*Fl,
//     gelu N*Fl
//   kept (recompute = full): only the layer input (Nl*C); the rest is recomputed in the backward.
// The layer inputs (residual stream, Nl*C each) are kept in both cases.
// Llama: no LN means (RMSNorm); qkv is kept expanded to every query head's K and V (3 N*Cl, the
// layout of the attention kernels and ring attention) after the rotary positions; fc is the
// gate|up projection (2 N*Fl) and gelu holds silu(gate)*up (N*Fl).
//
// Usage per optimizer step: store.BeginStep(); per micro-batch ForwardLoss then Backward (the
// last with last_micro_batch = true); store.Step(lr). Not thread-safe (one caller).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/kernels/bf16.h"
#include "core/kernels/cross_entropy.h"
#include "core/kernels/rope.h"
#include "core/precision.h"
#include "core/status.h"
#include "core/tensor.h"
#include "model/layout.h"
#include "parallel/context/ring_exchange.h"
#include "parallel/param_layout.h"
#include "parallel/tensor_parallel/context.h"
#include "parallel/zero/param_store.h"

namespace loom {

struct ModelRuntime {
  int64_t micro_batch = 1;                 // sequences per forward/backward
  int64_t seq = 0;                         // tokens per sequence (<= max_seq); 0 means max_seq
  Recompute recompute = Recompute::kNone;  // none or full (selective is not run)
  int64_t vocab_chunk = 4096;              // vocabulary rows per cross-entropy chunk
  int64_t attn_block_q = 64;               // query rows per attention block
  int64_t attn_block_k = 256;              // key/value rows per attention block
  // fp32, or bf16 compute (DESIGN: fp32 master weights, optimizer state, gradients and
  // reductions): the linear layers multiply bf16 inputs by bf16 copies of the weights with fp32
  // accumulation, and the normed and GELU activations that feed them are kept in bf16. The
  // residual stream, attention, the norms' statistics, the head and loss, and every gradient
  // stay fp32.
  Precision precision = Precision::kFp32;
  // bf16: keep each weight's bf16 copy until the parameters change (false: cast on every
  // AcquireParams and drop it on ReleaseParams, for a ZeRO-3 store that holds no layer's
  // weights between uses).
  bool keep_bf16_weights = true;
};

class Gpt {
 public:
  // The layout must hold this chunk's parameters (ModelLayout(config, tp.size()) for the
  // whole model); `store` owns the buffers. `chunk` defaults to the whole model.
  static Result<std::unique_ptr<Gpt>> Create(const ModelConfig& config, const ModelRuntime& rt,
                                             const ParamLayout& layout, ParamStore* store,
                                             TensorParallel tp = {}, ChunkSpec chunk = {-1},
                                             ContextParallel cp = {});
  ~Gpt();

  const ModelConfig& config() const { return config_; }
  const ModelRuntime& runtime() const { return rt_; }
  const ParamLayout& layout() const { return layout_; }
  const ChunkSpec& chunk() const { return chunk_; }

  // Whole model, one micro-batch in flight (slot 0): forward over tokens/targets [b, t]
  // (b <= micro_batch, t <= seq; the same on every TP rank), keeping activations for Backward.
  // Returns the sum of the per-token losses (not the mean).
  Result<double> ForwardLoss(const int32_t* tokens, const int32_t* targets, int64_t b, int64_t t);
  // Backward of the last ForwardLoss; every token's loss has weight `dloss` (1/total tokens of the
  // global batch for a mean). Accumulates into the store's gradients and reports each bucket.
  Status Backward(float dloss, bool last_micro_batch);
  // Logits [vocab] of the last position of a single sequence of length t (for sampling; tp = 1).
  Status ForwardLastLogits(const int32_t* tokens, int64_t t, float* logits);

  // Pipeline form: activations of each in-flight micro-batch live in their own slot, allocated by
  // ForwardChunk and freed by ReleaseSlot. The chunk's input is `tokens` (first chunk) or `input`
  // ([rows, hidden] from the previous chunk, rows = b*t, or b*t/tp with SP); `targets` are used by
  // the last chunk, which returns the loss sum (0 for others).
  Result<double> ForwardChunk(int slot, const int32_t* tokens, const int32_t* targets,
                              const float* input, int64_t b, int64_t t);
  // Output activation of a forwarded slot (chunks without the head).
  const float* OutputActivation(int slot) const;
  // Backward of a slot: `dout` is the gradient of OutputActivation (chunks without the head).
  // Afterwards InputGradient() holds the gradient of the chunk's input (chunks without the
  // embedding) until the next backward.
  Status BackwardChunk(int slot, float dloss, const float* dout, bool last_micro_batch);
  const float* InputGradient() const;
  void ReleaseSlot(int slot);
  // Rows of the activations exchanged between chunks for micro-batches of [b, t].
  int64_t ActivationRows(int64_t b, int64_t t) const;

  // A head chunk without the embedding uses the first chunk's wte (TP-local [vocab/tp, hidden]),
  // valid for the step, and accumulates its gradient into `dwte` (same shape).
  void SetTiedEmbedding(const float* wte, float* dwte) {
    tied_wte_ = wte;
    tied_dwte_ = dwte;
  }

  // Bytes of activations kept per layer for one micro-batch under the current plan.
  int64_t ActivationBytesPerLayer() const;
  // Activation bytes of one in-flight slot (0 before the first forward) and of the scratch
  // buffers every chunk keeps (allocated at creation). Peak activation memory of a rank is
  // sum over its chunks of scratch + in-flight slots * slot bytes.
  int64_t SlotBytes() const { return slot_bytes_; }
  int64_t ScratchBytes() const { return scratch_bytes_; }

 private:
  struct LayerActs;
  struct Slot;
  Gpt(const ModelConfig& config, const ModelRuntime& rt, const ParamLayout& layout,
      ParamStore* store, TensorParallel tp, ChunkSpec chunk, ContextParallel cp);
  // Global position of row `i` of the current micro-batch (rows are [b, t] row-major).
  int64_t Position(int64_t i) const;
  // Positions of rows [first, first + n) (context parallelism: the split's global positions).
  std::vector<int32_t> Positions(int64_t first, int64_t n) const;
  Status Allocate();
  Status AllocateScratch();
  Result<Slot*> GetSlot(int id);
  // Makes the micro-batch [b, t] current (rows_).
  Status SetMicroBatch(int64_t b, int64_t t);
  Status Embed(Slot& slot);
  Status EmbedBackward(Slot& slot, const float* dresid);
  Result<double> HeadForward(Slot& slot, const int32_t* targets);
  Status HeadBackward(Slot& slot, float dloss, float* dresid, bool last_micro_batch);
  Status LayersBackward(Slot& slot, float* dresid, bool last_micro_batch);
  Status LayerForward(int layer, const float* x, float* out, LayerActs& a);
  Status LayerBackward(int layer, const float* x, LayerActs& a, float* dresid);
  // Llama's (worker/llama_layer.cc).
  Status LlamaLayerForward(int layer, const float* x, float* out, LayerActs& a);
  Status LlamaLayerBackward(int layer, const float* x, LayerActs& a, float* dresid);
  // Rotary positions on the projected q|k (qkvc_) and each query head's K and V copied from its
  // KV head into a.qkv; the backward sums the copies' gradients (dqkv_) into qkvc_ and rotates
  // back. Under CP, a.qkv and dqkv_ hold q and the KV heads the local queries read (the ring
  // groups the heads), not a copy per query head.
  void ExpandQkv(LayerActs& a);
  void CollapseQkv();
  // Under CP, the KV heads a.qkv carries after q: how many, and the first's local index.
  int64_t RingKvHeads() const;
  int64_t RingKvFirst() const;
  RingShape Ring() const;  // this micro-batch's ring attention (CP)
  // The norm of the family (LayerNorm, or RMSNorm without mean or bias) and its backward
  // (accumulating into dx and the norm's gradients). `w` is the weight's parameter index;
  // GPT-2's bias is the next one.
  void NormForward(float* out, Tensor& mean, Tensor& rstd, const float* x, int w, int64_t rows);
  void NormBackward(float* dx, const float* dy, const float* x, int w, const Tensor& mean,
                    const Tensor& rstd, int64_t rows);
  bool bf16() const { return rt_.precision == Precision::kBf16; }
  // The linear layers of LayerForward/LayerBackward in the run's precision. NormColumn: the
  // local rows of x normed (norm parameters at slot `norm`) into the kept `ln` (gathered over SP),
  // then the column-parallel linear (weight slot `wk`, bias wk + 1) into y [full, out_local].
  Status NormColumnForward(int layer, int norm, const float* x, Tensor& ln, Tensor& mean,
                           Tensor& rstd, int wk, float* y, int64_t out_local);
  // Row-parallel linear (weight slot `wk`, no bias) of the kept x [full, in_local] into y_local.
  Status RowForward(int layer, int wk, const Tensor& x, float* y_local, int64_t in_local);
  // Their backwards: dy holds d(output); the column backward leaves d(ln) in dln_local (local
  // rows), the row backward d(x) in dx [full, in_local].
  Status ColumnBackward(int layer, int wk, const float* dy, const Tensor& ln, int64_t out_local,
                        float* dln_local);
  Status RowBackward(int layer, int wk, const float* dy_local, const Tensor& x, float* dx,
                     int64_t in_local);
  // A row-parallel input [full, in_local] in bf16: itself when kept in bf16, else cast to att16_.
  const Bf16* RowInput16(const Tensor& x, int64_t in_local);
  // bf16 copy of parameter `index`, cast from the store's fp32 values when they changed.
  Result<const Bf16*> W16(int index);
  // bf16 copy of the output projection the head multiplies by (the tied embedding, or lm_head).
  Result<const Bf16*> Wte16();
  // Under keep_bf16_weights = false: drops the layer's bf16 copies (its bucket was released).
  void DropLayerW16(int layer);
  // Llama's attn.q: its bf16 copy includes the attn.kv that follows it (one q|k|v GEMM).
  bool FusedWithNext(int index) const;
  // Attention of the current micro-batch: local, or ring attention across cp.
  Status Attend(LayerActs& a);
  Status AttendBackward(LayerActs& a, const float* datt);
  // Where a LayerNorm writes: its SP rows (then gathered into `full`), or `full` itself.
  float* NormOut(Tensor& full);
  VocabShard Shard() const;         // this rank's vocabulary shard for the current micro-batch
  const float* P(int index) const;  // parameter `index` of the layout
  float* G(int index);
  const float* Wte() const;
  float* DWte();
  // The output projection the head multiplies by: wte when tied, else lm_head.
  const float* HeadW() const { return head_ >= 0 ? P(head_) : Wte(); }
  float* HeadDW() { return head_ >= 0 ? G(head_) : DWte(); }
  // A layer's bias `k` (GPT-2), or null (Llama has none).
  const float* Bias(int layer, int k) const { return llama_ ? nullptr : P(LayerParam(layer, k)); }
  float* BiasGrad(int layer, int k) { return llama_ ? nullptr : G(LayerParam(layer, k)); }
  int LayerParam(int layer, int k) const { return layer_base_[layer - chunk_.first_layer] + k; }
  int Bucket(int index) const { return layout_.params[static_cast<size_t>(index)].bucket; }

  ModelConfig config_;
  ModelRuntime rt_;
  const ParamLayout& layout_;
  ParamStore* store_;
  TensorParallel tp_;
  ChunkSpec chunk_;
  ContextParallel cp_;
  RingAttentionExchange ring_;
  int wte_ = -1, wpe_ = -1, lnf_ = -1;  // parameter indices (-1: not in this chunk)
  int head_ = -1;                       // lm_head.weight (untied head only)
  bool llama_ = false;
  // Llama: TP-local KV heads, the global index of the first, the width of the local q|k|v
  // projection ((Hl + 2 KVl) hd), its output (and, in the backward, its gradient), the rotary
  // table and the current micro-batch's positions of its full rows.
  int64_t kvl_ = 0, kv_first_ = 0, qw_ = 0;
  Tensor qkvc_;
  RopeTable rope_;
  std::vector<int32_t> pos_;
  std::vector<int> layer_base_;  // index of h.{l}.ln_1.weight per local layer
  const float* tied_wte_ = nullptr;
  float* tied_dwte_ = nullptr;
  int64_t cl_ = 0, fl_ = 0, hl_ = 0, vl_ = 0;  // TP-local attention width, MLP width, heads, vocab
  std::map<int, std::unique_ptr<Slot>> slots_;
  Slot* cur_ = nullptr;  // the slot being computed
  Tensor ln_local_, rowpar_, ce_stats_, ce_chunk_, ce_dloss_;
  Tensor dresid_, dfull_, dln_, dln_local_, datt_, dqkv_, dfc_, emb_full_;
  int64_t cur_b_ = 0, cur_t_ = 0;
  TokenRows rows_;  // of the current micro-batch
  int64_t slot_bytes_ = 0, scratch_bytes_ = 0;
  // bf16 only: the norm output before rounding [Nl, C] fp32, its bf16 local rows under SP, the
  // attention output in bf16 [N, Cl], and the output gradients cast for the GEMMs.
  Tensor ln32_, ln16_local_, att16_, dy16_;
  Tensor lnf16_, ce_chunk16_, tied_w16_;  // the head's: final norm output, dlogits chunk, wte
  std::vector<Tensor> w16_;               // per parameter index (weights only)
  std::vector<int64_t> w16_version_;      // the store's params_version() they were cast at
};

}  // namespace loom
