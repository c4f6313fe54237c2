// CRC-32C (Castagnoli): the checksum of checkpoint chunks, training-data samples and, with the
// in-memory snapshots, of every erasure-coded fragment. ISA-L's crc32_iscsi underneath
// (hardware-accelerated where the CPU has it).
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom {

// CRC-32C of `n` bytes, continuing from `crc` (0 to start): Crc32c(b, n2, Crc32c(a, n1)) is the
// checksum of a followed by b.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

}  // namespace loom
