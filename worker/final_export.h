// checkpoint.export (docs/CHECKPOINT.md, "Exporting the final weights"): once every step has
// run and the final checkpoint is committed, world rank 0 writes what `loom ckpt export` would,
// from that checkpoint — one safetensors file when the path ends in .safetensors, else a
// Hugging Face model directory — in checkpoint.export_dtype. The destination is checked before
// training, so a run never fails after its last step for a path that could not take the export.
#pragma once

#include <cstdint>

#include "checkpoint/export.h"
#include "core/status.h"
#include "job/job_config.h"

namespace loom {

// Before training: checkpoint.export lies outside every checkpoint, its directory exists, a
// .safetensors path is not a directory and a directory path not a file. Errors name the field.
Status CheckExportDestination(const JobConfig& job);

// What a Hugging Face export of a model with `vocab` tokens writes beside its weights, knowing the
// job that trained it (`job`; null: unknown, e.g. an imported checkpoint): the byte-level
// tokenizer when the job read text (`data.text`, which Loom tokenises byte by byte) or, whatever
// the data, when the vocabulary is exactly the byte vocabulary's 256 (token files are then taken
// for `loom data prepare`'s); and the job's sampling settings (`sample:`) for generation.
HfExtras HfExtrasFor(const JobConfig* job, int64_t vocab);

// World rank 0, after the checkpoint of `step` under checkpoint.dir was committed: exports it
// to checkpoint.export (removing what an export cut short by a crash left first).
Status ExportFinalWeights(const JobConfig& job, int64_t step);

}  // namespace loom
