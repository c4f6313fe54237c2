// RS(k, m) with ISA-L: Cauchy generator, ec_encode_data for encoding and for decoding by the
// inverse of the surviving rows.
#include "fault/erasure/reed_solomon.h"

#include <isa-l/erasure_code.h>

#include <algorithm>
#include <string>

namespace loom {

Result<ReedSolomon> ReedSolomon::Create(int k, int m) {
  if (k < 1 || m < 1 || k + m > kMaxFragments) {
    return InvalidArgument(
        "erasure code RS(" + std::to_string(k) + ", " + std::to_string(m) +
        "): expected k >= 1, m >= 1 and k + m <= " + std::to_string(kMaxFragments));
  }
  return ReedSolomon(k, m);
}

ReedSolomon::ReedSolomon(int k, int m) : k_(k), m_(m) {
  matrix_.resize(static_cast<size_t>((k + m) * k));
  gf_gen_cauchy1_matrix(matrix_.data(), k + m, k);
  encode_tables_.resize(static_cast<size_t>(32 * k * m));
  ec_init_tables(k, m, matrix_.data() + k * k, encode_tables_.data());
}

void ReedSolomon::Apply(size_t len, int sources, int outputs, const std::vector<uint8_t>& tables,
                        const uint8_t* const* in, uint8_t* const* out) {
  constexpr size_t kPart = size_t{1} << 30;
  std::vector<uint8_t*> src(static_cast<size_t>(sources)), dst(static_cast<size_t>(outputs));
  for (size_t at = 0; at < len; at += kPart) {
    const size_t n = std::min(kPart, len - at);
    for (int i = 0; i < sources; ++i) src[i] = const_cast<uint8_t*>(in[i]) + at;
    for (int i = 0; i < outputs; ++i) dst[i] = out[i] + at;
    ec_encode_data(static_cast<int>(n), sources, outputs, const_cast<uint8_t*>(tables.data()),
                   src.data(), dst.data());
  }
}

void ReedSolomon::Encode(size_t len, const uint8_t* const* data, uint8_t* const* parity) const {
  Apply(len, k_, m_, encode_tables_, data, parity);
}

Status ReedSolomon::Decode(size_t len, const std::vector<const uint8_t*>& fragments,
                           const std::vector<int>& want, uint8_t* const* out) const {
  const int n = k_ + m_;
  if (static_cast<int>(fragments.size()) != n) {
    return InvalidArgument("RS decode: expected " + std::to_string(n) + " fragment slots, got " +
                           std::to_string(fragments.size()));
  }
  // The first k fragments present, and the k x k rows of the generator that made them.
  std::vector<int> used;
  for (int i = 0; i < n && static_cast<int>(used.size()) < k_; ++i) {
    if (fragments[i] != nullptr) used.push_back(i);
  }
  if (static_cast<int>(used.size()) < k_) {
    return InvalidArgument("RS(" + std::to_string(k_) + ", " + std::to_string(m_) +
                           ") decode: " + std::to_string(used.size()) + " fragments present, " +
                           std::to_string(k_) + " needed");
  }
  for (int w : want) {
    if (w < 0 || w >= n) {
      return InvalidArgument("RS decode: fragment index " + std::to_string(w) + " out of [0, " +
                             std::to_string(n) + ")");
    }
  }
  if (want.empty()) return Status::Ok();
  std::vector<uint8_t> sub(static_cast<size_t>(k_ * k_)), inv(sub.size());
  for (int r = 0; r < k_; ++r) {
    std::copy_n(matrix_.data() + used[r] * k_, k_, sub.data() + r * k_);
  }
  if (gf_invert_matrix(sub.data(), inv.data(), k_) != 0) {
    return Internal("RS decode: the surviving rows are singular (not a Cauchy code?)");
  }
  // Fragment w = row w of the generator x data = (row w x inv) x the used fragments.
  std::vector<uint8_t> rows(static_cast<size_t>(want.size() * k_));
  for (size_t o = 0; o < want.size(); ++o) {
    const uint8_t* g = matrix_.data() + want[o] * k_;
    for (int c = 0; c < k_; ++c) {
      uint8_t s = 0;
      for (int j = 0; j < k_; ++j) s ^= gf_mul(g[j], inv[j * k_ + c]);
      rows[o * k_ + c] = s;
    }
  }
  std::vector<uint8_t> tables(static_cast<size_t>(32 * k_) * want.size());
  ec_init_tables(k_, static_cast<int>(want.size()), rows.data(), tables.data());
  std::vector<const uint8_t*> src(static_cast<size_t>(k_));
  for (int r = 0; r < k_; ++r) src[r] = fragments[used[r]];
  Apply(len, k_, static_cast<int>(want.size()), tables, src.data(), out);
  return Status::Ok();
}

}  // namespace loom
