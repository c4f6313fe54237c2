// Counter-based window sampler.
#include "worker/data/sampler.h"

#include <algorithm>

#include "core/rng.h"

namespace loom {

WindowSampler::WindowSampler(const std::vector<int32_t>* tokens, int64_t seq, int64_t global_batch,
                             uint64_t seed, uint64_t stream)
    : tokens_(tokens), seq_(seq), global_batch_(global_batch), seed_(seed), stream_(stream) {}

void WindowSampler::SetOrigin(int64_t step, int64_t samples) {
  origin_step_ = step;
  origin_samples_ = samples;
}

int64_t WindowSampler::Offset(int64_t step, int64_t sample) const {
  const uint64_t span = tokens_->size() - static_cast<uint64_t>(seq_);  // valid starts: [0, span)
  uint64_t r = Mix64(
      HashCombine(HashCombine(seed_, stream_), static_cast<uint64_t>(Consumed(step) + sample)));
  return static_cast<int64_t>(r % span);
}

void WindowSampler::Fill(int64_t step, int64_t first, int64_t count, int32_t* inputs,
                         int32_t* targets) const {
  for (int64_t j = 0; j < count; ++j) {
    const int32_t* src = tokens_->data() + Offset(step, first + j);
    std::copy(src, src + seq_, inputs + j * seq_);
    std::copy(src + 1, src + seq_ + 1, targets + j * seq_);
  }
}

}  // namespace loom
