// Reed-Solomon RS(k, m) erasure coding over GF(2^8) with Intel ISA-L: k data fragments, m parity
// fragments, any k of the k + m rebuild the rest. The generator is a systematic Cauchy matrix
// (identity on top of a Cauchy block), so every k x k submatrix is invertible: any m fragments
// may be lost, whichever they are.
//
// Fragments are indexed 0..k-1 (data) and k..k+m-1 (parity). All fragments of one stripe have the
// same length; the caller pads. Lengths are bytes of any size (ISA-L takes an int: longer
// fragments are coded in parts).
//
// Thread-safety: a ReedSolomon is immutable after Create; Encode and Decode may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"

namespace loom {

class ReedSolomon {
 public:
  // The limits: k data and m parity fragments with k + m <= kMaxFragments.
  static constexpr int kMaxFragments = 64;
  static Result<ReedSolomon> Create(int k, int m);

  int k() const { return k_; }
  int m() const { return m_; }

  // parity[0..m) = the m parity fragments of data[0..k), each `len` bytes. The buffers must not
  // overlap.
  void Encode(size_t len, const uint8_t* const* data, uint8_t* const* parity) const;

  // Rebuilds fragments from any k others. `fragments`: k + m pointers, null where a fragment is
  // missing; `want`: the indices to rebuild (data or parity), written to out[0..want.size()).
  // InvalidArgument when fewer than k fragments are present or an index is out of range.
  Status Decode(size_t len, const std::vector<const uint8_t*>& fragments,
                const std::vector<int>& want, uint8_t* const* out) const;

 private:
  ReedSolomon(int k, int m);
  // Runs ec_encode_data in parts of at most 1 GiB: out[r] = sum_i coeff(r, i) * in[i].
  static void Apply(size_t len, int sources, int outputs, const std::vector<uint8_t>& tables,
                    const uint8_t* const* in, uint8_t* const* out);

  int k_ = 0, m_ = 0;
  std::vector<uint8_t> matrix_;         // (k + m) x k generator, row-major
  std::vector<uint8_t> encode_tables_;  // ec_init_tables of its m parity rows
};

}  // namespace loom
