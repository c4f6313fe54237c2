// Checkpoint metadata I/O and directory conventions.
#include "checkpoint/format.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "checkpoint/metadata_check.h"
#include "core/crc32c.h"
#include "core/file_util.h"

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
  LOOM_RETURN_IF_ERROR(ValidateMetadata(path, m));
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
