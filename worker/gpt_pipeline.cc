// The GPT chunks of a rank as a pipeline stage.
#include "worker/gpt_pipeline.h"

namespace loom {

GptPipelineStage::GptPipelineStage(std::vector<Gpt*> chunks, ParamStore* store,
                                   const ParamLayout& layout, int64_t micro_batch, int64_t seq,
                                   float dloss)
    : chunks_(std::move(chunks)),
      store_(store),
      wte_(layout.Find("wte")),
      tied_(chunks_[0]->config().tie_embeddings),
      micro_batch_(micro_batch),
      seq_(seq),
      dloss_(dloss),
      embedding_floats_(wte_ ? wte_->numel()
                             : layout.padded_vocab / layout.tp * chunks_[0]->config().hidden) {
  // The head chunk on the last stage uses the first stage's wte (tied embeddings).
  Gpt& last = *chunks_.back();
  if (tied_ && last.chunk().head && !last.chunk().embedding) {
    head_wte_.assign(static_cast<size_t>(embedding_floats_), 0.0f);
    head_dwte_.assign(static_cast<size_t>(embedding_floats_), 0.0f);
    last.SetTiedEmbedding(head_wte_.data(), head_dwte_.data());
  }
}

int64_t GptPipelineStage::ActivationFloats() const {
  return chunks_[0]->ActivationRows(micro_batch_, seq_) * chunks_[0]->config().hidden;
}

Result<double> GptPipelineStage::Forward(int micro, int chunk, const float* input) {
  const int64_t off = Offset(micro);
  return chunks_[static_cast<size_t>(chunk)]->ForwardChunk(micro, inputs_ + off, targets_ + off,
                                                           input, micro_batch_, seq_);
}

const float* GptPipelineStage::Output(int micro, int chunk) const {
  return chunks_[static_cast<size_t>(chunk)]->OutputActivation(micro);
}

Status GptPipelineStage::Backward(int micro, int chunk, const float* dout, bool last) {
  return chunks_[static_cast<size_t>(chunk)]->BackwardChunk(micro, dloss_, dout, last);
}

const float* GptPipelineStage::InputGradient(int chunk) const {
  return chunks_[static_cast<size_t>(chunk)]->InputGradient();
}

void GptPipelineStage::Release(int micro, int chunk) {
  chunks_[static_cast<size_t>(chunk)]->ReleaseSlot(micro);
}

Result<const float*> GptPipelineStage::EmbeddingWeights() {
  if (wte_ == nullptr || !tied_) return static_cast<const float*>(nullptr);
  LOOM_RETURN_IF_ERROR(store_->AcquireParams(wte_->bucket, -1));
  return static_cast<const float*>(store_->Params(wte_->bucket) + wte_->bucket_offset);
}

float* GptPipelineStage::EmbeddingGrads() {
  float* g = store_->Grads(wte_->bucket);
  return g == nullptr ? nullptr : g + wte_->bucket_offset;
}

}  // namespace loom
