// The GPT as a pipeline stage (parallel/pipeline/stage.h): this rank's chunk models over one
// parameter store, with the token data of the current batch, for the pipeline executor.
//
// Micro-batch m of the batch set with SetBatch reads tokens and targets at
// (m - first_micro) * micro_batch * seq; each (micro-batch, chunk) uses the chunk model's slot m.
// The tied embedding: the stage owning `wte` hands out its store's bucket; a last stage whose head
// lacks the embedding gets a copy of the owner's wte and a gradient buffer of its own, which its
// head chunk uses (Gpt::SetTiedEmbedding).
//
// Not owning the chunks or the store, which must outlive it; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "parallel/pipeline/stage.h"
#include "parallel/zero/param_store.h"
#include "worker/gpt.h"

namespace loom {

class GptPipelineStage : public PipelineStage {
 public:
  // `chunks`: the rank's models by local chunk (all built on `layout`, held by `store`);
  // micro-batches of `micro_batch` sequences of `seq` (local) tokens; every token's loss has
  // weight `dloss` in the backward.
  GptPipelineStage(std::vector<Gpt*> chunks, ParamStore* store, const ParamLayout& layout,
                   int64_t micro_batch, int64_t seq, float dloss);

  // Tokens and targets of micro-batches first_micro, first_micro + 1, ... (valid while they run).
  void SetBatch(const int32_t* inputs, const int32_t* targets, int first_micro = 0) {
    inputs_ = inputs;
    targets_ = targets;
    first_micro_ = first_micro;
  }

  int64_t ActivationFloats() const override;
  Result<double> Forward(int micro, int chunk, const float* input) override;
  const float* Output(int micro, int chunk) const override;
  Status Backward(int micro, int chunk, const float* dout, bool last) override;
  const float* InputGradient(int chunk) const override;
  void Release(int micro, int chunk) override;
  bool TiedEmbedding() const override { return tied_; }
  int64_t EmbeddingFloats() const override { return embedding_floats_; }
  Result<const float*> EmbeddingWeights() override;
  float* EmbeddingGrads() override;
  float* HeadEmbedding() override { return head_wte_.empty() ? nullptr : head_wte_.data(); }
  float* HeadEmbeddingGrads() override { return head_dwte_.empty() ? nullptr : head_dwte_.data(); }

 private:
  int64_t Offset(int micro) const { return (micro - first_micro_) * micro_batch_ * seq_; }

  std::vector<Gpt*> chunks_;
  ParamStore* store_;
  const ParamInfo* wte_;  // this rank's wte, or null
  bool tied_;             // the head uses wte (else lm_head: nothing exchanged)
  int64_t micro_batch_, seq_;
  float dloss_;
  int64_t embedding_floats_;
  std::vector<float> head_wte_, head_dwte_;  // a head without the embedding: the owner's wte
  const int32_t* inputs_ = nullptr;
  const int32_t* targets_ = nullptr;
  int first_micro_ = 0;
};

}  // namespace loom
