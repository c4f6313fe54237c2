// The on-disk layout of universal checkpoints (docs/CHECKPOINT.md):
//
//   <root>/latest                 "step_00000020\n", replaced atomically after each commit
//   <root>/step_00000020/         one committed checkpoint
//       metadata.json             proto/checkpoint.proto as JSON, written last
//       rank_00000.safetensors    data written by world rank 0 (safetensors layout)
//   <root>/step_00000030.tmp/     a save in progress (never loaded; removed by later saves)
//
// A directory is a checkpoint only if it is named step_<N> and holds a metadata.json: the
// directory is renamed into place after its metadata and every data file are fsynced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "proto/checkpoint.pb.h"

namespace loom {

// 2: metadata.json carries its own checksum (metadata_crc32c). 3: and `provenance` (the Loom
// version, time, job file and loss of the save). Versions 1 and 2 are still read.
constexpr int kCheckpointFormatVersion = 3;
constexpr uint64_t kChecksumBlockBytes = 1 << 20;
// Data sections of rank files start at a multiple of this (the header is padded with spaces).
constexpr uint64_t kDataAlignment = 4096;
constexpr char kMetadataFile[] = "metadata.json";
// In a checkpoint root: the lock a training run holds on it (worker/checkpointer.h).
constexpr char kRunLockFile[] = ".loom.lock";
constexpr char kLatestFile[] = "latest";
// In a checkpoint root: the checkpoint.load (absolute path) the run saving there started from.
constexpr char kLoadOriginFile[] = "load_origin";

std::string StepDirName(int64_t step);  // "step_00000020"
std::string RankFileName(int rank);     // "rank_00003.safetensors"
std::string JoinPath(const std::string& a, const std::string& b);

// Per-block CRCs of a chunk's bytes (blocks of kChecksumBlockBytes).
std::vector<uint32_t> BlockCrcs(const void* data, size_t n);
// The same for a chunk whose bytes are the concatenation of `parts` (pointer, length).
std::vector<uint32_t> BlockCrcs(const std::vector<std::pair<const char*, size_t>>& parts);

// Parses `<dir>/metadata.json` and checks it is self-consistent: version, model, every chunk's
// region inside its tensor's shape, byte length = elements x 4, one CRC per block, files listed.
// Errors name the file and, for a chunk, the tensor, state and chunk number.
Result<proto::CheckpointMetadata> ReadMetadata(const std::string& dir);
// Also: the file's own checksum (field metadata_crc32c) and, in a canonical step_<N> directory,
// step N.
// Writes the metadata as JSON atomically (temporary file, fsync, rename, directory fsync),
// sealed with its checksum.
Status WriteMetadata(const std::string& dir, const proto::CheckpointMetadata& meta);
Result<std::string> MetadataToJson(const proto::CheckpointMetadata& meta);
// Fills in the metadata_crc32c field of a metadata JSON text (which must hold the field with an
// 8-character string value) for the text's other bytes. For WriteMetadata, and for tools and
// tests that edit a metadata file on purpose. InvalidArgument without the field.
Result<std::string> SealMetadataJson(std::string json);

// Whether `path` holds a metadata file (a step directory, under whatever name).
bool IsStepDir(const std::string& path);
// The last component of `path`, a trailing separator ignored ("ckpt/step_00000020/" ->
// "step_00000020").
std::string PathName(const std::string& path);
// `path` lexically normalised, without a trailing separator ("ck/step_6/" -> "ck/step_6").
std::string NormalPath(const std::string& path);

// Whether `m` was made by `loom ckpt import`: never trained, so no optimizer or data settings.
bool IsImportedCheckpoint(const proto::CheckpointMetadata& m);
// Now, in UTC, as provenance.saved_at records it: "2026-11-23T09:12:04Z".
std::string UtcTimestamp();
// Provenance strings go into Protobuf `string` fields, which must be UTF-8 (the JSON printer
// drops bytes that are not). IsUtf8: whether `s` is; Utf8OrMarked: `s` with each byte that is
// not part of a valid UTF-8 sequence replaced by '?' (for paths, which Linux lets be anything).
bool IsUtf8(std::string_view s);
std::string Utf8OrMarked(std::string_view s);
// The largest job text a checkpoint records (provenance.job_yaml); longer ones are left out.
constexpr size_t kMaxRecordedJobBytes = 1 << 20;

// Committed checkpoints under `root` (directories step_<N> with a metadata file), newest first.
// A missing root is an empty list.
std::vector<std::pair<int64_t, std::string>> ListCheckpoints(const std::string& root);
// The step directory `latest` names, or "" (absent or unreadable).
std::string ReadLatest(const std::string& root);
// An output of a tool that reads the checkpoint `step_dir` ("": reads none) must lie outside it,
// outside every other committed checkpoint beside it (its root's step_<N> directories) and
// inside no checkpoint anywhere, and must not be a checkpoint root's `latest` or load_origin
// file: InvalidArgument naming `what` and the checkpoint otherwise.
Status CheckOutsideCheckpoints(const std::string& out, const std::string& step_dir,
                               const std::string& what);
// Whether `dir` is named *.tmp: an uncommitted save (or a deletion in progress), which nothing
// loads or converts, whatever its files look like. CheckNotTemporary: FailedPrecondition then.
bool IsTemporaryName(const std::string& dir);
Status CheckNotTemporary(const std::string& dir);
// A path given by the user: a step directory (has metadata.json) or a root (its newest
// committed checkpoint). NotFound when neither.
Result<std::string> ResolveCheckpointDir(const std::string& path);

}  // namespace loom
