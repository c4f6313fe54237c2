// Checkpoint metadata I/O and directory conventions.
#include "checkpoint/format.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>

#include "checkpoint/shard_plan.h"
#include "core/crc32c.h"
#include "core/file_util.h"
#include "parallel/param_layout.h"

namespace loom {

namespace fs = std::filesystem;

std::string StepDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step_%08lld", static_cast<long long>(step));
  return buf;
}

std::string RankFileName(int rank) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "rank_%05d.safetensors", rank);
  return buf;
}

bool IsImportedCheckpoint(const proto::CheckpointMetadata& m) {
  const proto::OptimizerState& o = m.optimizer();
  return o.step_count() == 0 && o.lr() == 0 && m.data().global_batch() == 0;
}

namespace {

// The length of the valid UTF-8 sequence at s[i], or 0.
size_t Utf8SequenceAt(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0)
    n = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0)
    n = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0)
    n = 4, cp = c & 0x07;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  // No overlong forms, no surrogates, nothing past U+10FFFF.
  const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min[n] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
  return n;
}

}  // namespace

bool IsUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceAt(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string Utf8OrMarked(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceAt(s, i);
    if (n == 0) {
      out += '?';
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string UtcTimestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string JoinPath(const std::string& a, const std::string& b) {
  return (fs::path(a) / b).string();
}

std::vector<uint32_t> BlockCrcs(const void* data, size_t n) {
  std::vector<uint32_t> out;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t at = 0; at < n; at += kChecksumBlockBytes) {
    out.push_back(Crc32c(p + at, std::min<size_t>(kChecksumBlockBytes, n - at)));
  }
  return out;
}

std::vector<uint32_t> BlockCrcs(const std::vector<std::pair<const char*, size_t>>& parts) {
  std::vector<uint32_t> out;
  uint32_t crc = 0;
  size_t in_block = 0;
  for (const auto& [data, n] : parts) {
    for (size_t at = 0; at < n;) {
      const size_t take = std::min<size_t>(n - at, kChecksumBlockBytes - in_block);
      crc = Crc32c(data + at, take, crc);
      in_block += take;
      at += take;
      if (in_block == kChecksumBlockBytes) {
        out.push_back(crc);
        crc = 0;
        in_block = 0;
      }
    }
  }
  if (in_block > 0) out.push_back(crc);
  return out;
}

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

// A GPT-2 of sizes that nothing computed from them can overflow.
Status CheckModelSpec(const std::string& path, const proto::ModelSpec& mo) {
  if (mo.vocab() <= 0 || mo.layers() <= 0 || mo.heads() <= 0 || mo.hidden() <= 0 ||
      mo.max_seq() <= 0) {
    return DataLoss(path +
                    ": field 'model': expected positive vocab, max_seq, layers, heads, "
                    "hidden");
  }
  if (mo.arch() != "gpt2") {
    return DataLoss(path + ": field 'model.arch': expected gpt2, got '" + mo.arch() + "'");
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
  const int64_t entries = m.tensors_size(), layers = m.model().layers();
  if (layers > entries || 3 * (4 + 12 * layers) != entries) {
    return DataLoss(
        path + ": holds " + std::to_string(entries) + " tensor entries, the model (" +
        std::to_string(layers) + " layers) has " +
        (layers > entries ? std::string("more") : std::to_string(3 * (4 + 12 * layers))));
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
  const ParamLayout model =
      ParamLayout::ForModel({mo.vocab(), mo.max_seq(), mo.layers(), mo.heads(), mo.hidden()}, 1);
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

Status Validate(const std::string& path, const proto::CheckpointMetadata& m) {
  LOOM_RETURN_IF_ERROR(CheckFormat(path, m));
  LOOM_RETURN_IF_ERROR(CheckModelSpec(path, m.model()));
  LOOM_ASSIGN_OR_RETURN(const TensorIndex index, IndexTensors(path, m));
  LOOM_RETURN_IF_ERROR(CheckTrainingState(path, m));
  LOOM_ASSIGN_OR_RETURN(const std::vector<std::string> files, ListFiles(path, m));
  LOOM_RETURN_IF_ERROR(CheckModelTensors(path, m.model(), index));
  return CheckChunks(path, m, files);
}

constexpr char kSealKey[] = "\"metadata_crc32c\"";
constexpr char kSealZeros[] = "00000000";

// The offset of the 8 characters of the metadata_crc32c value in `json`, or npos.
size_t SealOffset(const std::string& json) {
  const size_t key = json.find(kSealKey);
  if (key == std::string::npos) return std::string::npos;
  size_t at = key + sizeof(kSealKey) - 1;
  auto skip_space = [&] {
    while (at < json.size() && std::isspace(static_cast<unsigned char>(json[at]))) ++at;
  };
  skip_space();
  if (at >= json.size() || json[at] != ':') return std::string::npos;
  ++at;
  skip_space();
  if (at + 10 > json.size() || json[at] != '"' || json[at + 9] != '"') return std::string::npos;
  return at + 1;
}

std::string Hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof(buf), "%08x", v);
  return buf;
}

// The file's checksum against its metadata_crc32c field.
Status CheckSeal(const std::string& path, std::string text) {
  const size_t at = SealOffset(text);
  if (at == std::string::npos) {
    return DataLoss(path + ": field 'metadata_crc32c': missing; expected the file's CRC-32C as " +
                    "8 hex digits (every checkpoint Loom writes has it)");
  }
  const std::string recorded = text.substr(at, 8);
  text.replace(at, 8, kSealZeros);
  const std::string actual = Hex32(Crc32c(text.data(), text.size()));
  if (recorded != actual) {
    return DataLoss(path + ": field 'metadata_crc32c': the file's CRC-32C is " + actual +
                    ", the file records " + recorded +
                    " (the metadata was changed or damaged after it was written)");
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> SealMetadataJson(std::string json) {
  const size_t at = SealOffset(json);
  if (at == std::string::npos) {
    return InvalidArgument("checkpoint metadata without a field 'metadata_crc32c' to seal");
  }
  json.replace(at, 8, kSealZeros);
  json.replace(at, 8, Hex32(Crc32c(json.data(), json.size())));
  return json;
}

Result<proto::CheckpointMetadata> ReadMetadata(const std::string& dir) {
  const std::string path = JoinPath(dir, kMetadataFile);
  // A regular file (a FIFO would block, a link to a device be read without end), of at most
  // 4 GiB: ~20 GB to parse, and far beyond any index (a million chunks take ~300 MB).
  Result<std::string> text = ReadRegularFile(path, uint64_t{4} << 30);
  if (!text.ok()) return text.status();
  proto::CheckpointMetadata m;
  google::protobuf::util::JsonParseOptions opt;
  opt.ignore_unknown_fields = false;
  auto st = google::protobuf::util::JsonStringToMessage(*text, &m, opt);
  if (!st.ok()) {
    // The parser quotes the input: bytes that are not printable ASCII are shown as '?', and
    // the quote is cut, so a file of binary garbage does not reach the terminal.
    std::string why(st.message().substr(0, 200));
    for (char& ch : why) {
      if (ch < 0x20 || ch > 0x7e) ch = '?';
    }
    return DataLoss(path + ": not a checkpoint metadata file: " + why);
  }
  // Version 1 files were written without a seal; any file that has one must match it (so a
  // flipped bit in "format_version": 2 is caught too).
  if (m.format_version() >= 2 || !m.metadata_crc32c().empty()) {
    LOOM_RETURN_IF_ERROR(CheckSeal(path, std::move(*text)));
  }
  LOOM_RETURN_IF_ERROR(Validate(path, m));
  // A step directory renamed by hand (or a step field edited) must not pass for another step.
  const std::string name = PathName(dir);
  long long n = -1;
  char tail = 0;
  if (std::sscanf(name.c_str(), "step_%lld%c", &n, &tail) == 1 && name == StepDirName(n) &&
      n != m.step()) {
    return DataLoss(path + ": field 'step': " + std::to_string(m.step()) +
                    ", but the directory is " + name);
  }
  return m;
}

Result<std::string> MetadataToJson(const proto::CheckpointMetadata& meta) {
  std::string json;
  google::protobuf::util::JsonPrintOptions opt;
  opt.add_whitespace = true;
  opt.preserve_proto_field_names = true;
  opt.always_print_primitive_fields = true;
  auto st = google::protobuf::util::MessageToJsonString(meta, &json, opt);
  if (!st.ok()) return Internal("serialise checkpoint metadata: " + std::string(st.message()));
  return json;
}

Status WriteMetadata(const std::string& dir, const proto::CheckpointMetadata& meta) {
  proto::CheckpointMetadata sealed = meta;  // e.g. a version 1 checkpoint's, resharded
  sealed.set_format_version(kCheckpointFormatVersion);
  sealed.set_metadata_crc32c(kSealZeros);
  LOOM_ASSIGN_OR_RETURN(std::string json, MetadataToJson(sealed));
  LOOM_ASSIGN_OR_RETURN(json, SealMetadataJson(std::move(json)));
  return WriteFileAtomic(JoinPath(dir, kMetadataFile), json);
}

namespace {

// `path` normalised, without a trailing separator.
fs::path Normal(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  return p.has_filename() ? p : p.parent_path();
}

}  // namespace

bool IsStepDir(const std::string& path) {
  std::error_code ec;
  return fs::exists(fs::path(path) / kMetadataFile, ec);
}

std::string PathName(const std::string& path) {
  return Normal(path).filename().string();
}

std::string NormalPath(const std::string& path) {
  return Normal(path).string();
}

std::vector<std::pair<int64_t, std::string>> ListCheckpoints(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    long long step = -1;
    char tail = 0;
    if (std::sscanf(name.c_str(), "step_%lld%c", &step, &tail) != 1 || step < 0) continue;
    if (name != StepDirName(step)) continue;  // only the canonical name is a checkpoint
    // One that cannot be looked into (permissions) is listed all the same: reading it names the
    // problem, where skipping it would silently take an older checkpoint for the newest.
    std::error_code look;
    if (!fs::exists(e.path() / kMetadataFile, look) &&
        (!look || look == std::errc::no_such_file_or_directory ||
         look == std::errc::not_a_directory)) {
      continue;
    }
    out.emplace_back(step, e.path().string());
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.first > b.first; });
  return out;
}

std::string ReadLatest(const std::string& root) {
  // A step directory's name: anything longer, or not a regular file, is no pointer.
  Result<std::string> text = ReadRegularFile(JoinPath(root, kLatestFile), 4096);
  if (!text.ok()) return "";
  std::string s = *text;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

Status CheckOutsideCheckpoints(const std::string& out, const std::string& step_dir,
                               const std::string& what) {
  if (!step_dir.empty()) {
    const fs::path dir = Normal(step_dir);
    std::vector<std::string> protect = {step_dir};
    const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
    for (const auto& [step, dir] : ListCheckpoints(parent.string())) protect.push_back(dir);
    for (const std::string& dir : protect) {
      if (PathWithin(out, dir)) {
        return InvalidArgument(what + " '" + out + "': inside the checkpoint '" + dir +
                               "'; choose a path outside every checkpoint");
      }
    }
  }
  // Nor inside any other checkpoint (links resolved where they exist).
  const fs::path path = CanonicalPath(out);
  for (fs::path a = path;; a = a.parent_path()) {
    // A checkpoint's metadata, not any metadata.json (a dataset's, a project's).
    if (IsStepDir(a.string()) && ReadMetadata(a.string()).ok()) {
      return InvalidArgument(what + " '" + out + "': inside the checkpoint '" + a.string() +
                             "'; choose a path outside every checkpoint");
    }
    if (a == a.parent_path()) break;
  }
  // Nor a root's own files.
  const std::string name = path.filename().string();
  if ((name == kLatestFile || name == kLoadOriginFile) &&
      !ListCheckpoints(path.parent_path().string()).empty()) {
    return InvalidArgument(what + " '" + out + "': the '" + name +
                           "' file of the checkpoint root '" + path.parent_path().string() +
                           "'; choose another name");
  }
  return Status::Ok();
}

bool IsTemporaryName(const std::string& dir) {
  const std::string name = PathName(dir);
  return name.size() > 4 && name.ends_with(".tmp");
}

Status CheckNotTemporary(const std::string& dir) {
  if (IsTemporaryName(dir)) {
    return FailedPrecondition("'" + dir +
                              "' is an uncommitted save or a deletion in progress (*.tmp), "
                              "never loaded; rename it to use it anyway");
  }
  return Status::Ok();
}

Result<std::string> ResolveCheckpointDir(const std::string& path) {
  std::error_code ec;
  if (IsStepDir(path)) return path;
  if (fs::exists(path, ec) && !fs::is_directory(path, ec)) {
    return InvalidArgument(path +
                           ": not a directory (expected a checkpoint root or a step directory)");
  }
  if (!fs::is_directory(path, ec)) return NotFound(path + ": no such checkpoint directory");
  auto list = ListCheckpoints(path);
  if (list.empty()) {
    fs::directory_iterator look(path, ec);
    if (ec) return IoError("list '" + path + "': " + ec.message());
    return NotFound(path + ": no committed checkpoint (expected a step_<N> directory with " +
                    kMetadataFile + ")");
  }
  return list.front().second;
}

}  // namespace loom
