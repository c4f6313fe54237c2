// Offline resharding: rewrites a checkpoint as the target layout would have saved it (the same
// shard plan, so the same files and chunks), reading only the saved chunks each target piece
// intersects. Runs on one CPU without a cluster; memory is bounded by about twice the largest
// tensor: one buffer of it, a read-ahead ring of half of it (8 to 32 MiB) and write buffers of
// half of it (8 to 64 MiB).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "parallel/layout.h"

namespace loom {

struct ReshardResult {
  std::string dir;          // the committed step directory under the output root
  uint64_t bytes_read = 0;  // from the source's data files
  uint64_t bytes_written = 0;
  std::string note;  // set when the target layout does not fit the checkpoint's data settings
};

// Parses "tp=2,pp=4,vpp=1,cp=1,dp=2,zero=3,sp=1" (any subset; absent keys: 1, zero 0, sp off).
// Errors name the item and what was expected.
Result<Layout> ParseLayoutSpec(const std::string& spec);

// Reads the checkpoint at `src` (a step directory or a root: its newest checkpoint) and writes it
// for layout `to` under `out_root` (step_<N>, `latest`), atomically. `to` is validated against
// the saved model and global batch. `out_root` must not already hold checkpoints.
Result<ReshardResult> Reshard(const std::string& src, const Layout& to,
                              const std::string& out_root);

}  // namespace loom
