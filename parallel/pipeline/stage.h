// What the pipeline executor drives: the part of the model on this pipeline rank, its local
// chunks (local chunk k is global chunk k * pp + rank), addressed by (micro-batch, local chunk).
// The executor knows nothing else of the model; the worker's GPT implements this over its chunk
// models and parameter store, tests implement it with fakes.
//
// Lifetimes: the activations of a forwarded (micro, chunk) are the stage's until Release; the
// executor releases each after its backward (training) or right after its forward (evaluation).
// Not thread-safe: the executor calls it from one thread.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace loom {

class PipelineStage {
 public:
  virtual ~PipelineStage() = default;

  // Floats of one activation, and of its gradient, passed between neighbouring chunks.
  virtual int64_t ActivationFloats() const = 0;
  // Forward of micro-batch `micro` through local chunk `chunk`; `input` is the previous chunk's
  // output (null for global chunk 0, which reads the micro-batch's tokens). Returns the sum of the
  // per-token losses for the chunk with the head, 0 for the others.
  virtual Result<double> Forward(int micro, int chunk, const float* input) = 0;
  // Output activation of a forwarded (micro, chunk) (chunks without the head).
  virtual const float* Output(int micro, int chunk) const = 0;
  // Backward of a forwarded (micro, chunk): `dout` is the gradient of Output (null for the chunk
  // with the head); `last` marks the step's last micro-batch (the gradients are then complete).
  virtual Status Backward(int micro, int chunk, const float* dout, bool last) = 0;
  // Gradient of the input of `chunk`'s last backward (chunks other than global chunk 0), valid
  // until that chunk's next backward.
  virtual const float* InputGradient(int chunk) const = 0;
  // Frees the activations of (micro, chunk).
  virtual void Release(int micro, int chunk) = 0;

  // Tied input and output embeddings (the first and the last stage sum their gradients): the
  // stage that owns the embedding sends its weights to the stage whose head uses them, which
  // accumulates the head's gradient over the step and sends it back.
  // Whether the head uses the input embedding (false: an untied lm_head of the last stage's own,
  // and nothing is exchanged).
  virtual bool TiedEmbedding() const { return true; }
  // Floats of the (tensor-parallel-local) embedding.
  virtual int64_t EmbeddingFloats() const = 0;
  // Owner: the embedding weights, valid for the step; null on a stage without the embedding.
  virtual Result<const float*> EmbeddingWeights() = 0;
  // Owner: the embedding's gradient accumulator, to which the head's gradient is added before the
  // embedding chunk's last backward (so before its data-parallel reduction); null when out of
  // memory.
  virtual float* EmbeddingGrads() = 0;
  // Head without the embedding: where the owner's weights are received, and the head's gradient
  // of them accumulated; null on other stages.
  virtual float* HeadEmbedding() = 0;
  virtual float* HeadEmbeddingGrads() = 0;
};

}  // namespace loom
