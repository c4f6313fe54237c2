// Memory of one rank: model states under ZeRO, activations kept for the backward, the embedding
// and logits at the pipeline edges, and communication buffers. Bytes throughout; pure arithmetic.
//
// Model states follow Rajbhandari et al. 2020 (ZeRO) for mixed-precision Adam, K = 12:
//   stage 0: (2 + 2 + 12) psi     stage 1: 2 psi + 2 psi + 12 psi / Nd
//   stage 2: 2 psi + 14 psi / Nd  stage 3: 16 psi / Nd
// (fp32 training: 4 + 4 + 8 bytes per parameter, same sharing). Nd is the number of ranks that
// share the parameters: dp * cp, since gradients are reduced over the data x context group.
//
// Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
// Transformer Models"), per layer and micro-batch, s tokens, b sequences, hidden h, a heads:
//   no parallelism sbh (34 + 5as/h)         tensor parallel  sbh (10 + 24/t + 5as/(ht))
//   + sequence parallel sbh (34/t + 5as/(ht))
//   selective recompute drops the 5as/h term; full recompute keeps the layer input, 2sbh
//   (2sbh/t with sequence parallelism).
// The constants assume 2-byte activations and dropout (1-byte masks); other element sizes, models
// without dropout and fused attention (which never stores the s x s scores) are derived from the
// same tensor list. With context parallelism a rank holds s/cp query tokens and scores of
// s/cp x s. Loom's executor under bf16 keeps only the GEMM inputs in bf16 (the LayerNorm outputs
// and the MLP's last intermediate) and the rest of the list in fp32 (ActivationShape::
// loom_storage): 52 bytes per token and channel of a GPT-2 layer against mixed precision's 34.
#pragma once

#include <cstdint>

#include "coordinator/cluster.h"
#include "coordinator/plan_job.h"
#include "model/config.h"
#include "parallel/layout.h"

namespace loom {

struct BytesPerParam {
  double weights = 0, grads = 0, optimizer = 0;
  double total() const { return weights + grads + optimizer; }
};
// bf16: 2 + 2 + 12 (fp32 master copy, Adam m and v); fp32: 4 + 4 + 8.
BytesPerParam ParamBytes(Precision p);
// The weights and gradients as an executor holds and moves them whole (a tied embedding's copy,
// ZeRO buckets, the optimizer's reads): ParamBytes under `mixed_precision_states` (Megatron's
// and DeepSpeed's bf16 weights and gradients), else Loom's fp32 parameters and gradients,
// 4 + 4 + 8, in either precision (the bf16 weight copies are counted where they are made).
BytesPerParam StateBytes(Precision p, bool mixed_precision_states);
// Bytes of one activation element in the compute precision.
inline int ElementBytes(Precision p) {
  return p == Precision::kBf16 ? 2 : 4;
}
// Bytes of one element of what tensor-parallel reductions (all-reduce, reduce-scatter), pipeline
// sends and ring attention's K/V blocks carry, and of what the element-wise kernels (norms,
// residual adds, GELU) read and write: the compute precision's where every tensor is kept in it
// (`mixed_precision_activations`: Megatron-LM), else fp32 (Loom's executor: the residual stream,
// attention and the linear layers' outputs stay fp32 under bf16; only the sequence-parallel
// gathers of GEMM inputs and output gradients travel in bf16, ElementBytes).
inline int CarriedBytes(Precision p, bool mixed_precision_activations) {
  return mixed_precision_activations ? ElementBytes(p) : 4;
}
// Whether the executor casts to bf16 for its GEMMs (Loom's under bf16: weights beside fp32
// masters, GEMM inputs beside fp32 activations), given the published runs' flag for the states
// (`mixed_precision_states`) or the activations (`mixed_precision_activations`): they keep those
// in bf16 already.
inline bool LoomBf16Casts(Precision p, bool mixed_precision) {
  return !mixed_precision && p == Precision::kBf16;
}

struct ModelStates {
  double weights = 0, grads = 0, optimizer = 0;
  double total() const { return weights + grads + optimizer; }
};
// What one rank holds of `psi` parameters shared by `nd` ranks under ZeRO `stage` (0..3), in
// mixed precision's layout (Rajbhandari et al.; Megatron's and DeepSpeed's): bf16 weights and
// gradients, fp32 master, m and v, the master sharded with the optimizer state.
ModelStates ZeroModelStates(double psi, int nd, int stage, Precision p);
// The same as Loom's executor keeps it: parameters and gradients in fp32 (the parameters are the
// master copy; sharded at stage 3, the gradients from stage 2), m and v sharded from stage 1, and
// under bf16 a bf16 copy of the weights beside the parameters (dropped with a released bucket
// under ZeRO 3, so not held for the step then).
ModelStates LoomModelStates(double psi, int nd, int stage, Precision p);

struct ActivationShape {
  int64_t micro_batch = 1;
  int64_t seq = 1;  // whole sequence (a rank holds seq / cp of it)
  int64_t hidden = 1;
  int64_t heads = 1;
  int tp = 1, cp = 1;
  bool sp = false;
  Recompute recompute = Recompute::kNone;
  int element_bytes = 2;
  bool dropout = true;
  bool fused_attention = false;
  int64_t kv_width = 0;  // of K and of V (0: = hidden, no grouped-query attention)
  int64_t ffn = 0;       // MLP width (0: 4 * hidden)
  bool gated = false;    // SwiGLU: gate and up outputs and their product are kept
  // Loom's executor (worker/gpt.h, worker/cuda/gpu_gpt.h): with 2-byte elements only the GEMM
  // inputs are 2 bytes (LayerNorm outputs, GELU output or SwiGLU product); the layer inputs,
  // Q, K, V, the attention output, the MLP's first intermediates and the backward's gradient
  // buffers are fp32. No effect with 4-byte elements.
  bool loom_storage = false;
};
// Bytes one layer keeps from its forward until its backward, for one micro-batch.
double LayerActivationBytes(const ActivationShape& a);
// Transient bytes while one layer runs its backward: with recompute the layer's forward is
// rebuilt first (the full activation list of one layer), plus the gradient buffers.
double LayerWorkingBytes(const ActivationShape& a);

struct MemoryBreakdown {
  double weights = 0, grads = 0, optimizer = 0;  // model states
  double activations = 0;  // in-flight micro-batches x layers, plus one layer's working set
  double edges = 0;        // embedding output and logits / loss at the pipeline edges
  double buffers = 0;      // communication buffers (TP gathers, pipeline transfers, ZeRO buckets)
  double total() const { return weights + grads + optimizer + activations + edges + buffers; }
};

struct StageMemoryInput {
  ModelConfig model;
  int64_t seq = 0, micro_batch = 1;
  Layout layout;
  Recompute recompute = Recompute::kNone;
  Precision precision = Precision::kBf16;
  bool dropout = true;
  bool fused_kernels = false;           // fused attention and chunked loss
  bool mixed_precision_states = false;  // ZeroModelStates (published runs), else LoomModelStates
  // All activations in the compute precision (published runs), else Loom's storage
  // (ActivationShape::loom_storage).
  bool mixed_precision_activations = false;
  int64_t vocab_chunk = 4096;  // Loom's logits chunk (fused kernels, Loom's activations)
};
// Peak memory of pipeline rank `stage` holding at most `in_flight` micro-batch chunks (from the
// schedule simulator) of its chunks' layers (layers / (pp * vpp) each unless the layout's first
// or last stage is set lighter: Layout::ChunkLayers).
MemoryBreakdown StageMemory(const StageMemoryInput& in, int stage, int in_flight);

}  // namespace loom
