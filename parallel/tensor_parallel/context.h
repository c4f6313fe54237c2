// The context every tensor-parallel building block takes: its group and whether sequence
// parallelism is on, and the token rows of the micro-batch being computed.
//
// Megatron tensor parallelism splits each linear layer over the tp ranks of a group; with
// sequence parallelism (SP) the regions between them (LayerNorms, residual adds, dropout-free
// biases) are split too, each rank holding a contiguous 1/tp of the micro-batch's token rows.
// With tp = 1 every building block is the plain single-process computation.
//
// Not owning: the communicator must outlive every block that uses the context (it is the
// trainer's placement's). Copyable value; no state of its own.
#pragma once

#include <cstdint>

#include "comm/communicator.h"

namespace loom {

struct TensorParallel {
  Communicator* comm = nullptr;  // null: tp = 1
  bool sp = false;               // sequence parallelism
  int size() const { return comm ? comm->size() : 1; }
  int rank() const { return comm ? comm->rank() : 0; }
  // Whether token rows are actually split (SP with more than one rank).
  bool sequence_parallel() const { return sp && size() > 1; }
};

// Token rows of one micro-batch of b sequences of t tokens: `full` = b*t rows, `local` = the rows
// this rank holds in the sequence-parallel regions (full / tp with SP, else full), starting at
// row `first` of the full micro-batch.
struct TokenRows {
  int64_t full = 0;
  int64_t local = 0;
  int64_t first = 0;
  static TokenRows Of(const TensorParallel& tp, int64_t full) {
    const int64_t local = tp.sp ? full / tp.size() : full;
    return {full, local, tp.sp ? tp.rank() * local : 0};
  }
};

}  // namespace loom
