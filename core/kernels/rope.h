// Rotary position embedding (RoPE) in the rotate-half form of Hugging Face's Llama: within a head
// vector of width hd, element j and element j + hd/2 (j < hd/2) rotate together by the angle
// pos * theta^(-2j/hd):
//   x'_j = x_j cos - x_{j+hd/2} sin,   x'_{j+hd/2} = x_{j+hd/2} cos + x_j sin.
// The backward is the rotation by the opposite angle. A Hugging Face checkpoint's q_proj and
// k_proj rows are in this order already (no permutation on import or export).
#pragma once

#include <cstdint>
#include <vector>

namespace loom {

// Llama 3.1's frequency scaling ("llama3"; model/config.h RopeScaling holds the same figures):
// with wavelength w = 2 pi / f and L = original_max_seq, f is kept when w < L / high_freq_factor,
// divided by factor when w > L / low_freq_factor, and between them interpolated,
//   f' = (1 - t) f / factor + t f,  t = (L / w - low_freq_factor) / (high - low).
struct RopeFrequencyScaling {
  double factor = 0;  // 0: none
  double low_freq_factor = 1, high_freq_factor = 4, original_max_seq = 8192;
};
double RopeScaledFrequency(double freq, const RopeFrequencyScaling& s);

// cos and sin of every (position, frequency) up to max_seq positions: [max_seq, hd/2] each,
// computed in double and rounded once.
struct RopeTable {
  int64_t half = 0;
  std::vector<float> cos, sin;
  static RopeTable Make(int64_t max_seq, int64_t head_dim, double theta,
                        const RopeFrequencyScaling& scaling = {});
};

// Rotates `heads` head vectors of each of `rows` rows in place: row i starts at x + i * ld, head
// h at column h * hd, its position is pos[i]. `inverse` rotates by the opposite angle (the
// backward of the forward rotation).
template <typename T>
void RopeApply(T* x, int64_t ld, int64_t rows, int64_t heads, const int32_t* pos,
               const RopeTable& table, bool inverse);

}  // namespace loom
