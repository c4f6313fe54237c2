// The consistency checks of a checkpoint's metadata, one aspect per function.
#include "checkpoint/metadata_check.h"
#include "checkpoint/metadata_specs.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/format.h"
#include "model/layout.h"
#include "parallel/param_layout.h"
#include "parallel/state_kind.h"

namespace loom {
namespace {

std::string ChunkWhere(const std::string& path, const proto::TensorEntry& t, int k) {
  return path + ": tensor '" + t.name() + "' state '" + t.state() + "' chunk " + std::to_string(k);
}

// The format version and the checksum block size.
Status CheckFormat(const std::string& path, const proto::CheckpointMetadata& m) {
  if (m.format_version() < 1 || m.format_version() > kCheckpointFormatVersion) {
    return DataLoss(path + ": field 'format_version': expected 1 to " +
                    std::to_string(kCheckpointFormatVersion) + ", got " +
                    std::to_string(m.format_version()));
  }
  // Bounded so that no block count or offset computed from it wraps (Loom writes 1 MiB).
  constexpr uint64_t kMaxBlockBytes = uint64_t{1} << 40;
  if (m.checksum_block_bytes() == 0 || m.checksum_block_bytes() > kMaxBlockBytes) {
    return DataLoss(path + ": field 'checksum_block_bytes': expected a block size from 1 to " +
                    std::to_string(kMaxBlockBytes) + ", got " +
                    std::to_string(m.checksum_block_bytes()));
  }
  return Status::Ok();
}

// A model of sizes that nothing computed from them can overflow.
Status CheckModelSpec(const std::string& path, const proto::ModelSpec& mo) {
  if (mo.vocab() <= 0 || mo.layers() <= 0 || mo.heads() <= 0 || mo.hidden() <= 0 ||
      mo.max_seq() <= 0) {
    return DataLoss(path +
                    ": field 'model': expected positive vocab, max_seq, layers, heads, "
                    "hidden");
  }
  if (mo.arch() != "gpt2" && mo.arch() != "llama") {
    return DataLoss(path + ": field 'model.arch': expected gpt2 or llama, got '" + mo.arch() + "'");
  }
  if (mo.arch() == "llama" &&
      (mo.kv_heads() <= 0 || mo.heads() % mo.kv_heads() != 0 || mo.ffn_hidden() <= 0 ||
       mo.ffn_hidden() > (int64_t{1} << 30) || mo.hidden() / mo.heads() % 2 != 0)) {
    return DataLoss(path + ": field 'model': a llama model needs kv_heads dividing heads (" +
                    std::to_string(mo.heads()) + ", got " + std::to_string(mo.kv_heads()) +
                    "), ffn_hidden in [1, 2^30] (got " + std::to_string(mo.ffn_hidden()) +
                    ") and an even head width");
  }
  if (mo.has_rope_scaling()) {
    const proto::RopeScalingSpec& r = mo.rope_scaling();
    if (mo.arch() != "llama" || r.type() != "llama3") {
      return DataLoss(path +
                      ": field 'model.rope_scaling.type': expected llama3 on a llama model, " +
                      "got '" + r.type() + "' on " + mo.arch());
    }
    if (Status v = ModelOf(mo).rope_scaling.Validate(); !v.ok()) {
      return DataLoss(path + ": field 'model': " + v.message());
    }
  }
  // Far beyond any model, and small enough that element counts fit in 63 bits (4 x hidden^2 is
  // at most 2^62; its byte count is checked per chunk).
  constexpr int64_t kMaxDim = int64_t{1} << 30;
  if (mo.vocab() > kMaxDim || mo.max_seq() > kMaxDim || mo.hidden() > kMaxDim ||
      mo.hidden() % mo.heads() != 0) {
    return DataLoss(path + ": field 'model': vocab " + std::to_string(mo.vocab()) + ", max_seq " +
                    std::to_string(mo.max_seq()) + ", hidden " + std::to_string(mo.hidden()) +
                    ", heads " + std::to_string(mo.heads()) +
                    ": expected sizes of at most 2^30 and heads dividing hidden");
  }
  return Status::Ok();
}

using TensorIndex = std::map<std::pair<std::string, std::string>, const proto::TensorEntry*>;

// The entries by (name, state), none twice, as many as the model has: counted before anything
// is built from the model's sizes (a damaged `layers` must not cost time or memory).
Result<TensorIndex> IndexTensors(const std::string& path, const proto::CheckpointMetadata& m) {
  TensorIndex index;
  for (const proto::TensorEntry& t : m.tensors()) {
    if (!index.emplace(std::make_pair(t.name(), t.state()), &t).second) {
      return DataLoss(path + ": tensor '" + t.name() + "' state '" + t.state() +
                      "' is listed twice");
    }
  }
  // Three states of each parameter (model/layout.h): GPT-2 has 4 outside the layers and 12 in
  // each; Llama 2 (3 with an untied head) and 7.
  const int64_t entries = m.tensors_size(), layers = m.model().layers();
  const bool llama = m.model().arch() == "llama";
  const int64_t outside = llama ? 2 + (m.model().untied() ? 1 : 0) : 4;
  const int64_t per_layer = llama ? 7 : 12;
  if (layers > entries || 3 * (outside + per_layer * layers) != entries) {
    return DataLoss(path + ": holds " + std::to_string(entries) + " tensor entries, the model (" +
                    std::to_string(layers) + " layers) has " +
                    (layers > entries ? std::string("more")
                                      : std::to_string(3 * (outside + per_layer * layers))));
  }
  return index;
}

// The layout it was saved with: only reported (the index alone says where every byte is), but
// a damaged one must not be reported as if it were a layout. cp and vpp may be absent (0).
Status CheckSavedLayout(const std::string& path, const proto::LayoutSpec& l) {
  const double ranks =
      static_cast<double>(l.tp()) * std::max(1, l.cp()) * l.pp() * l.dp();  // cannot wrap
  if (l.tp() < 1 || l.cp() < 0 || l.pp() < 1 || l.vpp() < 0 || l.dp() < 1 || l.zero() < 0 ||
      l.zero() > 3 || l.vpp() > (1 << 20) || ranks > 2147483648.0) {
    return DataLoss(path + ": field 'saved_layout': expected tp, pp and dp of at least 1, cp and " +
                    "vpp of at least 1 or absent, at most 2^31 ranks, and zero 0 to 3, got tp=" +
                    std::to_string(l.tp()) + " cp=" + std::to_string(l.cp()) +
                    " pp=" + std::to_string(l.pp()) + " vpp=" + std::to_string(l.vpp()) +
                    " dp=" + std::to_string(l.dp()) + " zero=" + std::to_string(l.zero()));
  }
  return Status::Ok();
}

// The step, the saved layout, the optimizer step count and the data position.
Status CheckTrainingState(const std::string& path, const proto::CheckpointMetadata& m) {
  if (m.step() < 0) {
    return DataLoss(path + ": field 'step': expected 0 or more, got " + std::to_string(m.step()));
  }
  LOOM_RETURN_IF_ERROR(CheckSavedLayout(path, m.saved_layout()));
  if (m.optimizer().step_count() < 0 || m.optimizer().step_count() > m.step()) {
    return DataLoss(path + ": field 'optimizer.step_count': expected 0 to the step (" +
                    std::to_string(m.step()) + "), got " +
                    std::to_string(m.optimizer().step_count()));
  }
  if (m.data().consumed_samples() < 0) {
    return DataLoss(path + ": field 'data.consumed_samples': expected 0 or more, got " +
                    std::to_string(m.data().consumed_samples()));
  }
  if (m.data().train_tokens() < 0) {
    return DataLoss(path + ": field 'data.train_tokens': expected 0 or more, got " +
                    std::to_string(m.data().train_tokens()));
  }
  return Status::Ok();
}

// The names in 'files', none twice, each with a rank.
Result<std::vector<std::string>> ListFiles(const std::string& path,
                                           const proto::CheckpointMetadata& m) {
  std::vector<std::string> files;
  for (const proto::FileEntry& f : m.files()) {
    if (std::find(files.begin(), files.end(), f.name()) != files.end()) {
      return DataLoss(path + ": field 'files': '" + f.name() + "' is listed twice");
    }
    if (f.rank() < 0) {
      return DataLoss(path + ": file '" + f.name() + "' field 'rank': expected 0 or more, got " +
                      std::to_string(f.rank()));
    }
    files.push_back(f.name());
  }
  return files;
}

// Every tensor of the model with its three states and the model's shape: as many entries as the
// model has and none twice, so every entry is one of these, and every shape is the model's (dims
// at most 2^32, the product at most 2^62: no element count computed from a region within it
// overflows).
Status CheckModelTensors(const std::string& path, const proto::ModelSpec& mo,
                         const TensorIndex& index) {
  const ParamLayout model = ModelLayout(ModelOf(mo), 1);
  for (const ParamInfo& p : model.params) {
    for (int s = 0; s < kNumStates; ++s) {
      const std::string state = StateName(static_cast<StateKind>(s));
      const auto it = index.find({p.name, state});
      const std::string what = path + ": tensor '" + p.name + "' state '" + state + "'";
      if (it == index.end()) return DataLoss(what + ": missing from the checkpoint");
      const std::vector<int64_t> shape(it->second->shape().begin(), it->second->shape().end());
      if (shape != std::vector<int64_t>(p.global_shape.begin(), p.global_shape.end())) {
        return DataLoss(what + ": field 'shape' does not match the model");
      }
    }
  }
  return Status::Ok();
}

// Chunk k's region inside the tensor's shape and its flat range inside the region.
Status CheckChunkRegion(const std::string& path, const proto::TensorEntry& t, int k) {
  const proto::Chunk& c = t.chunks(k);
  if (c.region_offsets_size() != t.shape_size() || c.region_sizes_size() != t.shape_size()) {
    return DataLoss(ChunkWhere(path, t, k) + ": region has the wrong number of dimensions");
  }
  const int64_t rows = t.shape(0), cols = t.shape_size() > 1 ? t.shape(1) : 1;
  const int64_t r0 = c.region_offsets(0), rs = c.region_sizes(0);
  const int64_t c0 = t.shape_size() > 1 ? c.region_offsets(1) : 0;
  const int64_t cs = t.shape_size() > 1 ? c.region_sizes(1) : 1;
  // Compared without sums of the file's numbers, which could wrap.
  if (r0 < 0 || rs < 0 || r0 > rows || rs > rows - r0 || c0 < 0 || cs < 0 || c0 > cols ||
      cs > cols - c0) {
    return DataLoss(
        ChunkWhere(path, t, k) + ": fields 'region_offsets' and 'region_sizes': " + "rows " +
        std::to_string(r0) + " + " + std::to_string(rs) + ", columns " + std::to_string(c0) +
        " + " + std::to_string(cs) + " lie outside the tensor's shape (" + std::to_string(rows) +
        ", " + std::to_string(cols) + ")");
  }
  if (c.flat_begin() < 0 || c.flat_begin() >= c.flat_end() || c.flat_end() > rs * cs) {
    return DataLoss(ChunkWhere(path, t, k) + ": fields 'flat_begin' and 'flat_end': " +
                    std::to_string(c.flat_begin()) + ".." + std::to_string(c.flat_end()) +
                    ", expected a non-empty range within the region's " + std::to_string(rs * cs) +
                    " elements");
  }
  return Status::Ok();
}

// Chunk k's bytes: its length for its elements, one checksum per block, and a place inside a
// listed file of this directory.
Status CheckChunkBytes(const std::string& path, const proto::CheckpointMetadata& m,
                       const std::vector<std::string>& files, const proto::TensorEntry& t, int k) {
  const proto::Chunk& c = t.chunks(k);
  // At most 2^62 elements (4 hidden^2 with hidden 2^30), whose byte count would wrap to 0.
  const uint64_t elements = static_cast<uint64_t>(c.flat_end() - c.flat_begin());
  if (elements > UINT64_MAX / 4) {
    return DataLoss(ChunkWhere(path, t, k) + ": fields 'flat_begin' and 'flat_end': " +
                    std::to_string(elements) + " elements, more bytes than 64 bits count");
  }
  const uint64_t bytes = elements * 4;  // > 0: the range is not empty
  if (c.length() != bytes) {
    return DataLoss(ChunkWhere(path, t, k) + ": field 'length' is " + std::to_string(c.length()) +
                    ", expected " + std::to_string(bytes));
  }
  const uint64_t blocks = (bytes - 1) / m.checksum_block_bytes() + 1;  // bytes > 0
  if (static_cast<uint64_t>(c.crc32c_size()) != blocks) {
    return DataLoss(ChunkWhere(path, t, k) + ": expected " + std::to_string(blocks) +
                    " checksums, got " + std::to_string(c.crc32c_size()));
  }
  if (c.file().find('/') != std::string::npos || c.file() == ".." || c.file().empty()) {
    return DataLoss(ChunkWhere(path, t, k) + ": field 'file': '" + c.file() +
                    "' is not a file name of this directory");
  }
  const auto f = std::find(files.begin(), files.end(), c.file());
  if (f == files.end()) {
    return DataLoss(ChunkWhere(path, t, k) + ": file '" + c.file() + "' is not listed in 'files'");
  }
  const uint64_t file_bytes = m.files(static_cast<int>(f - files.begin())).bytes();
  if (c.offset() > file_bytes || c.length() > file_bytes - c.offset()) {
    return DataLoss(ChunkWhere(path, t, k) + ": bytes " + std::to_string(c.offset()) + " + " +
                    std::to_string(c.length()) + " lie beyond the end of '" + c.file() + "' (" +
                    std::to_string(file_bytes) + " bytes, field 'files')");
  }
  return Status::Ok();
}

// Every entry's dtype and dimensions, and every chunk.
Status CheckChunks(const std::string& path, const proto::CheckpointMetadata& m,
                   const std::vector<std::string>& files) {
  for (const proto::TensorEntry& t : m.tensors()) {
    if (t.dtype() != "F32") {
      return DataLoss(path + ": tensor '" + t.name() + "' field 'dtype': expected F32, got '" +
                      t.dtype() + "'");
    }
    if (t.shape_size() < 1 || t.shape_size() > 2) {
      return DataLoss(path + ": tensor '" + t.name() + "' field 'shape': expected 1 or 2 dims");
    }
    for (int k = 0; k < t.chunks_size(); ++k) {
      LOOM_RETURN_IF_ERROR(CheckChunkRegion(path, t, k));
      LOOM_RETURN_IF_ERROR(CheckChunkBytes(path, m, files, t, k));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateMetadata(const std::string& path, const proto::CheckpointMetadata& m) {
  LOOM_RETURN_IF_ERROR(CheckFormat(path, m));
  LOOM_RETURN_IF_ERROR(CheckModelSpec(path, m.model()));
  LOOM_ASSIGN_OR_RETURN(const TensorIndex index, IndexTensors(path, m));
  LOOM_RETURN_IF_ERROR(CheckTrainingState(path, m));
  LOOM_ASSIGN_OR_RETURN(const std::vector<std::string> files, ListFiles(path, m));
  LOOM_RETURN_IF_ERROR(CheckModelTensors(path, m.model(), index));
  return CheckChunks(path, m, files);
}

}  // namespace loom
