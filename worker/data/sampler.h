// Deterministic sampling of training windows. The samples of global step s are a pure function of
// (seed, s): sample j of step s starts at a position drawn from (seed, stream, s * global_batch +
// j), so every parallel layout, restart or micro-batch split sees exactly the same global batch; a
// data parallel rank simply takes its slice [first, first + count) of the step's samples. A run
// resumed with another global batch continues the sample stream where the checkpoint left it
// (SetOrigin), as Megatron's consumed_samples does: no sample index is drawn twice or skipped.
#pragma once

#include <cstdint>
#include <vector>

namespace loom {

class WindowSampler {
 public:
  // `tokens` must outlive the sampler and hold more than seq tokens.
  WindowSampler(const std::vector<int32_t>* tokens, int64_t seq, int64_t global_batch,
                uint64_t seed, uint64_t stream);

  // Writes samples [first, first + count) of global step `step`: inputs and next-token targets,
  // each count * seq tokens, row-major [count, seq].
  void Fill(int64_t step, int64_t first, int64_t count, int32_t* inputs, int32_t* targets) const;
  // Start position of one sample (exposed for tests and the data-position record).
  int64_t Offset(int64_t step, int64_t sample) const;
  // From step `step` on, sample j of step s is stream index samples + (s - step) * global_batch
  // + j: `samples` were consumed in the first `step` steps (under any global batch). The default
  // (0, 0) gives s * global_batch + j. Steps before `step` are not to be drawn.
  void SetOrigin(int64_t step, int64_t samples);
  // Samples consumed after `step` steps.
  int64_t Consumed(int64_t step) const {
    return origin_samples_ + (step - origin_step_) * global_batch_;
  }

 private:
  const std::vector<int32_t>* tokens_;
  int64_t seq_, global_batch_;
  int64_t origin_step_ = 0, origin_samples_ = 0;
  uint64_t seed_, stream_;
};

// Streams: independent draws for training and evaluation from the same seed.
constexpr uint64_t kTrainStream = 0x7472616E;  // "tran"
constexpr uint64_t kEvalStream = 0x6576616C;   // "eval"

}  // namespace loom
