// The chunk table of universal checkpoints (what metadata.json lists for every tensor: its
// chunks, each a region of the tensor at an offset of a rank's data file, with block CRCs), built
// apart from how the bytes are stored: by the file writer as it writes (checkpoint/writer.h), and
// for a rank's image held in memory — an in-memory snapshot, whose image is byte for byte the
// data section that rank's checkpoint file would have — so that the checkpoint reader's
// intersecting reads (checkpoint/reader.h) can reshard snapshots too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/shard_plan.h"
#include "core/status.h"
#include "model/config.h"
#include "proto/checkpoint.pb.h"

namespace loom {

// Adds the chunk of piece `k` of plan.writes for `state`, stored at `offset` of `file` with
// block CRCs `crcs`, to `fragment`.
void AddPieceChunk(const RankShardPlan& plan, StateKind state, size_t k, const std::string& file,
                   uint64_t offset, std::vector<uint32_t> crcs, proto::CheckpointMetadata* fragment);

// The fragment of world rank `rank`'s image (ImageBytes(plan) bytes, as the save engine lays it
// out): one file named RankFileName(rank) of the image's size whose data starts at offset 0,
// every piece's chunk with the CRCs of its bytes in `image`.
proto::CheckpointMetadata ImageFragment(const RankShardPlan& plan, int rank, const char* image);

// Merges every rank's fragment into `base` (which carries everything but files and tensors):
// tensors in the model's canonical order, chunks by region; the format version and checksum
// block size set. Internal, naming `where`, when a tensor or state is missing.
Result<proto::CheckpointMetadata> MergeFragments(const ModelConfig& model,
                                                 proto::CheckpointMetadata base,
                                                 std::vector<proto::CheckpointMetadata> fragments,
                                                 const std::string& where);

}  // namespace loom
