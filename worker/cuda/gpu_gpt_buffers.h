// The device buffers of GpuGpt (gpu_gpt.h) other than parameters, gradients and moments, private
// to its implementation files. N = micro_batch * seq rows, C = hidden, F = 4C, H = heads; fp32
// unless marked; "gemm-in" buffers are bf16 under bf16 and fp32 otherwise. All kActivations.
#pragma once

#include <vector>

#include "worker/cuda/device_block.h"
#include "worker/cuda/gpu_gpt.h"

namespace loom {

// Kept per layer from the forward for the backward (worker/gpt.h's plan, recompute none).
struct GpuGpt::LayerActs {
  DeviceBlock ln1;                 // gemm-in [N, C]
  DeviceBlock ln1_mean, ln1_rstd;  // [N]
  DeviceBlock qkv;                 // [N, 3C], bias added
  DeviceBlock att, lse;            // [N, C], [B, H, T]
  DeviceBlock res2;                // [N, C]: residual after attention
  DeviceBlock ln2;                 // gemm-in [N, C]
  DeviceBlock ln2_mean, ln2_rstd;  // [N]
  DeviceBlock fc;                  // [N, F], bias added (GELU's input)
  DeviceBlock gelu;                // gemm-in [N, F]
};

struct GpuGpt::Buffers {
  std::vector<DeviceBlock> resid;       // layers + 1 residual-stream tensors [N, C]; 0: embeddings
  std::vector<LayerActs> acts;          // per layer
  DeviceBlock tokens, targets;          // int32 [N], copied from the host per micro-batch
  DeviceBlock lnf, lnf_mean, lnf_rstd;  // final norm: gemm-in [N, C], [N], [N]
  // Cross-entropy: running statistics, lse and per-token loss of the forward, per-token dloss of
  // the backward [N] each, and one chunk of logits [N, min(vocab_chunk, vocab)].
  DeviceBlock ce_max, ce_sumexp, ce_target, ce_lse, ce_loss, ce_dloss, ce_chunk;
  // Backward scratch: d(residual) [N, C], d(norm output) [N, C], d(attention out) [N, C],
  // d(qkv) [N, 3C], d(fc) [N, F].
  DeviceBlock dresid, dln, datt, dqkv, dfc;
  // bf16 only: the attention output cast for the projection [N, C]; an output gradient cast for
  // the GEMMs [N, max(3C, F)]; one chunk of dlogits cast for the head's gradient GEMMs.
  DeviceBlock att16, dy16, ce_chunk16;
  // Attention's scores for core/cuda/attention_gemm.h, attn_ws_floats floats (2 T^2 per head of
  // a pass, at most kAttentionWorkspaceBytes); empty where not one head fits (long sequences),
  // and then attention runs in the flash kernels of kernels.h.
  DeviceBlock attn_ws;
  int64_t attn_ws_floats = 0;
};

}  // namespace loom
