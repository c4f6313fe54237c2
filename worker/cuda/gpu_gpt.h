// The GPT-2 training step on one GPU (tp = cp = pp = dp = 1): the device twin of worker/gpt.h's
// single-process model, with the same math layer by layer (LayerNorm, fused-QKV attention, GELU
// MLP, learned positions, tied embeddings, chunked cross-entropy against wte) over the CUDA
// kernels and cuBLASLt GEMMs of core/cuda/, and the same AdamW and global-norm clipping as the
// CPU ParamStore (parallel/zero/sharded_optimizer.cc: decay where ParamInfo::decay, i.e. matrices
// and embeddings; clip_grad_norm_ semantics; bias-corrected steps counted from 1).
//
// Everything lives on the device that is current when Create runs, in blocks of one
// CachingAllocator over device memory, accounted by MemTag:
//   kParams      fp32 master parameters, one flat buffer in ModelLayout(config, 1)'s order and
//                offsets (layout().total floats), + under bf16 the bf16 copies of the four matrices
//                of every layer (c_attn, attn.c_proj, c_fc, mlp.c_proj) and of wte (the head's),
//                cast again after every change of the parameters (LoadParams, Step)
//   kGrads       fp32 gradients, the same layout
//   kOptimizer   AdamW's first and second moments, the same layout (2 x 4 bytes per parameter)
//   kActivations everything kept between the forward and the backward (worker/gpt.h's plan with
//                recompute = none, for micro_batch x seq tokens), the backward's scratch and the
//                attention's score workspace (up to kAttentionWorkspaceBytes; see below)
//   kOther       a few bytes (the norm's accumulator)
// The cuBLASLt workspace (gemm.h) is allocated by its handle, outside the allocator.
//
// Precision (ModelRuntime::precision), as the CPU model: fp32 everywhere, or bf16 where the
// linear layers and the head multiply bf16 inputs (the LayerNorm and GELU outputs, written in bf16
// directly, the attention output cast for the projection, each chunk's dlogits cast for the
// head's gradient GEMMs) by the bf16 weight copies with fp32 accumulation; the residual stream,
// attention, norm statistics, logits, softmax and loss, gradients, master weights and optimizer
// stay fp32 (attention's GEMMs on TF32 tensor cores by default: set_allow_tf32).
//
// Attention runs through batched fp32 GEMMs over [heads, T, T] scores (core/cuda/attention_gemm.h)
// when a workspace of kAttentionWorkspaceBytes holds the scores of at least one head (2 T^2
// floats: T up to 11K), and in the flash-style kernels (O(T) memory, CUDA cores) beyond.
//
// Streams and threads: all work is queued on one stream the model owns, with one GEMM handle.
// ForwardBackward, Step and the copies return after the device has finished what they need on
// the host (see each); faults of queued work surface at the next of those or at Synchronize().
// Not thread-safe: one caller, on a thread whose current device is the one at Create.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/caching_allocator.h"
#include "core/cuda/device_memory.h"
#include "core/cuda/gemm.h"
#include "core/cuda/runtime.h"
#include "core/memory.h"
#include "core/status.h"
#include "model/config.h"
#include "model/layout.h"
#include "parallel/zero/param_store.h"  // AdamWConfig
#include "worker/cuda/device_block.h"
#include "worker/gpt.h"  // ModelRuntime

namespace loom {

class GpuGpt {
 public:
  // The most device memory the attention's score workspace takes (see the file comment).
  static constexpr int64_t kAttentionWorkspaceBytes = int64_t{1} << 30;
  // Whether attention runs through GEMMs (the workspace holds a head and they are not turned
  // off), else the flash kernels.
  bool attention_by_gemm() const;
  // Off: the flash kernels even where the workspace holds a head (to compare the two paths).
  void set_attention_by_gemm(bool on) { gemm_attention_ = on; }

  // Allocates everything for micro-batches up to rt.micro_batch x rt.seq (seq 0: max_seq); the
  // parameters are zero until LoadParams or InitParams, the gradients and moments zero.
  // Unimplemented for recompute other than none; FailedPrecondition without a CUDA device.
  // rt.attn_block_q/k and keep_bf16_weights are ignored (fixed tiles; copies always kept).
  static Result<std::unique_ptr<GpuGpt>> Create(const ModelConfig& config, const ModelRuntime& rt,
                                                const AdamWConfig& adamw);
  ~GpuGpt();
  GpuGpt(const GpuGpt&) = delete;
  GpuGpt& operator=(const GpuGpt&) = delete;

  const ModelConfig& config() const { return config_; }
  const ModelRuntime& runtime() const { return rt_; }
  const ParamLayout& layout() const { return layout_; }

  // Parameters from / to host buffers of layout().total floats (CPU layout). Synchronous. Loading
  // resets nothing else (moments and step count stay), as ParamStore::LoadParams.
  Status LoadParams(const float* host);
  Status CopyParams(float* host);
  // model/layout.h's initialisation (InitParams(layout(), seed)), computed on the host and loaded.
  Status InitParams(uint64_t seed);
  // The accumulated gradients (before clipping; zero right after Step). Synchronous.
  Status CopyGrads(float* host);

  // Forward and backward of one micro-batch: tokens and targets are host arrays [b, t] (b <=
  // micro_batch, t <= seq, ids in [0, vocab)); every token's loss has weight `dloss` (1 / tokens
  // of the whole batch for a mean). Accumulates (+=) into the gradients. Returns the sum of the
  // per-token losses (not the mean), once the device has finished the micro-batch.
  Result<double> ForwardBackward(const int32_t* tokens, const int32_t* targets, int64_t b,
                                 int64_t t, float dloss);
  // The optimizer step over the accumulated gradients: global norm (in double, rounded to float
  // before the square root as the CPU store does), clipping to AdamWConfig::grad_clip, AdamW with
  // learning rate `lr`, bf16 copies refreshed, gradients zeroed. Returns the norm before clipping
  // (it waits for the norm; the update itself is left queued: see Synchronize).
  Result<double> Step(double lr);
  // Zeroes the gradients (queued).
  Status ZeroGrads();
  // Waits for all queued work; reports faults of it.
  Status Synchronize();
  // AdamW updates applied so far.
  int64_t optimizer_steps() const { return steps_; }

  // TF32 for the fp32 GEMMs. Under fp32 that is all of them, off by default so the fp32 path
  // agrees with the CPU to fp32 rounding. Under bf16 it is the attention's products only, on by
  // default: TF32's 10-bit mantissas are finer than the bf16 inputs of every other GEMM there,
  // and the loss stays within 1e-3 of the CPU bf16 model's (whose attention is fp32).
  void set_allow_tf32(bool allow) { gemm_.set_allow_tf32(allow); }

  // Bytes allocated (and peak) per category; the allocator's report ("params 1.0 MiB (peak ...),
  // ...; reserved ... on cuda device 0").
  MemUsage usage(MemTag tag) const { return alloc_->usage(tag); }
  std::string MemoryReport() const { return alloc_->Report(); }
  // Elements of the bf16 weight copies (0 under fp32).
  int64_t bf16_weight_elements() const { return w16_elements_; }

 private:
  struct LayerActs;  // gpu_gpt_buffers.h
  struct Buffers;
  // One run of parameters updated by one AdamW launch: contiguous, with the same decay.
  struct OptRun {
    int64_t offset = 0, numel = 0;
    bool decay = false;
  };

  GpuGpt(const ModelConfig& config, const ModelRuntime& rt, const AdamWConfig& adamw,
         cuda::OwnedStream stream, cuda::GemmHandle gemm);
  Status Allocate();
  Result<DeviceBlock> Alloc(size_t bytes, MemTag tag);
  bool bf16() const { return rt_.precision == Precision::kBf16; }
  cuda::Stream stream() const { return stream_.get(); }

  // gpu_gpt_layers.cc: the forward and backward of the current micro-batch (b_, t_).
  Status Forward();
  Status Backward(float dloss);
  Status LayerForward(int layer, LayerActs& a, const float* x, float* out);
  Status LayerBackward(int layer, LayerActs& a, const float* x, float* dresid);
  // y[n, out] = x[n, in] W^T (the weight at parameter `w`; x is fp32 or bf16 by precision);
  // overwrites y. The bias is added by the caller (with the residual where there is one).
  Status LinearForward(int w, const void* x, float* y, int64_t in, int64_t out);
  // dx[n, in] = dy W (overwrites; dx may be null), dW += dy^T x, dbias += column sums of dy (the
  // bias is parameter w + 1).
  Status LinearBackward(int w, const float* dy, const void* x, float* dx, int64_t in, int64_t out);
  Status RefreshW16();

  int LayerParam(int layer, int k) const { return layer_base_[static_cast<size_t>(layer)] + k; }
  float* P(int index) const;
  float* G(int index) const;
  const uint16_t* W16(int index) const;

  ModelConfig config_;
  ModelRuntime rt_;
  AdamWConfig adamw_;
  ParamLayout layout_;
  int wte_ = -1, wpe_ = -1, lnf_ = -1;
  std::vector<int> layer_base_;      // index of h.{l}.ln_1.weight
  std::vector<int64_t> w16_offset_;  // per parameter: offset in w16_, -1 for non-matrices
  int64_t w16_elements_ = 0;
  std::vector<OptRun> opt_runs_;
  int64_t steps_ = 0;
  bool gemm_attention_ = true;
  int64_t b_ = 0, t_ = 0;  // the current micro-batch

  // Declared in destruction order's reverse: blocks go back to the allocator before it is
  // destroyed, the allocator returns its memory before the stream and handle go.
  cuda::OwnedStream stream_;
  cuda::GemmHandle gemm_;
  std::unique_ptr<cuda::DeviceMemory> raw_;
  std::unique_ptr<CachingAllocator> alloc_;
  DeviceBlock params_, grads_, m_, v_, w16_, norm_total_;
  std::unique_ptr<Buffers> buf_;
};

}  // namespace loom
