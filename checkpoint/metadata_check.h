// Whether a checkpoint's metadata is self-consistent before anything is read through it:
// version, model, training state, every tensor of the model with its shape, and every chunk's
// region, byte range, checksum count and file. A damaged or hostile metadata.json must neither
// wrap a computed size nor cost time or memory in proportion to a bad number (docs/CHECKPOINT.md,
// "How it is tested": WrappingNumbersInTheMetadataAreRefused).
#pragma once

#include <string>

#include "core/status.h"
#include "proto/checkpoint.pb.h"

namespace loom {

// DataLoss naming `path` (the metadata file) and, for a chunk, the tensor, state and chunk
// number. Used by ReadMetadata (checkpoint/format.h).
Status ValidateMetadata(const std::string& path, const proto::CheckpointMetadata& m);

}  // namespace loom
