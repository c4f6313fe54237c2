// Safetensors writer/reader on nlohmann::json.
#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <vector>

#include "core/file_util.h"

namespace loom {

Status WriteSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const NamedTensor& nt : tensors) {
    if (header.contains(nt.name)) {
      return InvalidArgument("safetensors '" + path + "': duplicate tensor name '" + nt.name + "'");
    }
    size_t bytes = nt.tensor.nbytes();
    header[nt.name] = {{"dtype", DTypeName(nt.tensor.dtype())},
                       {"shape", nt.tensor.shape()},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // keep data 8-byte aligned, as the spec suggests
  uint64_t len = json.size();
  char len_bytes[8];
  std::memcpy(len_bytes, &len, 8);  // little-endian hosts only (x86-64, aarch64)
  std::vector<std::string_view> parts;
  parts.emplace_back(len_bytes, 8);
  parts.emplace_back(json);
  for (const NamedTensor& nt : tensors) {
    parts.emplace_back(static_cast<const char*>(nt.tensor.raw()), nt.tensor.nbytes());
  }
  return WriteFileAtomicParts(path, parts.data(), parts.size());
}

namespace {

// Headers larger than this are refused before being read (real ones are kilobytes).
constexpr uint64_t kMaxHeaderBytes = 100 << 20;

Status Bad(const std::string& path, const std::string& what) {
  return DataLoss("safetensors '" + path + "': " + what);
}

// Parses header `json` of a file whose data section is `data_size` bytes from `data_begin`.
Result<SafetensorsHeader> ParseHeader(const std::string& path, std::string_view json,
                                      uint64_t data_begin, uint64_t data_size) {
  auto bad = [&](const std::string& what) { return Bad(path, what); };
  // A name given twice would silently keep the last entry (another tensor's bytes, say).
  std::set<std::string> keys;
  std::string twice;
  auto on_key = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !keys.insert(parsed.get<std::string>()).second && twice.empty()) {
      twice = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json header = nlohmann::json::parse(json.begin(), json.end(), on_key,
                                                /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return bad("header is not a JSON object");
  if (!twice.empty()) return bad("'" + twice + "' appears twice in the header");
  SafetensorsHeader out;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& e = it.value();
    if (name == "__metadata__") {
      if (!e.is_object()) return bad("__metadata__ is not an object");
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string()) return bad("__metadata__." + m.key() + " is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
        !e.contains("data_offsets") || !e["dtype"].is_string() || !e["shape"].is_array() ||
        !e["data_offsets"].is_array() || e["data_offsets"].size() != 2) {
      return bad("tensor '" + name + "': expected {dtype, shape, data_offsets[2]}");
    }
    Result<DType> dtype = DTypeFromName(e["dtype"].get<std::string>());
    if (!dtype.ok()) return bad("tensor '" + name + "': " + dtype.status().message());
    SafetensorsEntry t;
    t.dtype = *dtype;
    uint64_t expect = DTypeSize(*dtype);
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned())
        return bad("tensor '" + name + "': shape must be non-negative integers");
      t.shape.push_back(d.get<int64_t>());
      if (t.shape.back() < 0 ||
          __builtin_mul_overflow(expect, static_cast<uint64_t>(t.shape.back()), &expect)) {
        return bad("tensor '" + name + "': shape " + ShapeToString(t.shape) +
                   "...: its size in bytes overflows 64 bits");
      }
    }
    if (!e["data_offsets"][0].is_number_unsigned() || !e["data_offsets"][1].is_number_unsigned()) {
      return bad("tensor '" + name + "': data_offsets must be non-negative integers");
    }
    const uint64_t b = e["data_offsets"][0].get<uint64_t>();
    const uint64_t en = e["data_offsets"][1].get<uint64_t>();
    if (en < b || en > data_size || en - b != expect) {
      return bad("tensor '" + name + "': data_offsets [" + std::to_string(b) + ", " +
                 std::to_string(en) + ") do not hold " + std::to_string(expect) + " bytes of " +
                 DTypeName(*dtype) + ShapeToString(t.shape) + " within " +
                 std::to_string(data_size) + " data bytes (truncated file?)");
    }
    t.offset = data_begin + b;
    t.bytes = expect;
    out.tensors.emplace(name, std::move(t));
  }
  // No two tensors share bytes (as the safetensors library requires).
  std::vector<std::pair<uint64_t, const std::string*>> starts;
  for (const auto& [name, t] : out.tensors) {
    if (t.bytes > 0) starts.emplace_back(t.offset, &name);
  }
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i) {
    const SafetensorsEntry& prev = out.tensors.at(*starts[i - 1].second);
    if (prev.offset + prev.bytes > starts[i].first) {
      return bad("tensors '" + *starts[i - 1].second + "' and '" + *starts[i].second +
                 "' overlap in the data section (data_offsets from " +
                 std::to_string(prev.offset - data_begin) + " and " +
                 std::to_string(starts[i].first - data_begin) + ")");
    }
  }
  return out;
}

}  // namespace

Result<SafetensorsFile> ReadSafetensors(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  if (bytes.size() < 8) {
    return Bad(path, "file is " + std::to_string(bytes.size()) + " bytes, no header");
  }
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  if (len > bytes.size() - 8) {
    return Bad(path, "header length " + std::to_string(len) + " exceeds file size " +
                         std::to_string(bytes.size()) + " (not a safetensors file?)");
  }
  LOOM_ASSIGN_OR_RETURN(
      SafetensorsHeader header,
      ParseHeader(path, std::string_view(bytes).substr(8, len), 8 + len, bytes.size() - 8 - len));
  SafetensorsFile out;
  out.metadata = std::move(header.metadata);
  for (const auto& [name, e] : header.tensors) {
    LOOM_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros(e.shape, e.dtype, MemTag::kOther));
    std::memcpy(t.raw(), bytes.data() + e.offset, e.bytes);
    out.tensors.emplace(name, std::move(t));
  }
  return out;
}

Result<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open '" + path + "'", errno);
  struct stat st;
  uint64_t len = 0;
  std::string json;
  Status s;
  if (::fstat(fd, &st) != 0) {
    s = ErrnoError("stat '" + path + "'", errno);
  } else if (!S_ISREG(st.st_mode)) {
    s = Bad(path, "not a regular file (a directory?)");
  } else if (st.st_size < 8 || ::pread(fd, &len, 8, 0) != 8) {
    s = Bad(path, "file is " + std::to_string(st.st_size) + " bytes, no header");
  } else if (len > static_cast<uint64_t>(st.st_size) - 8 || len > kMaxHeaderBytes) {
    s = Bad(path, "header length " + std::to_string(len) + " exceeds file size " +
                      std::to_string(st.st_size) + " (not a safetensors file?)");
  } else {
    json.resize(len);
    if (::pread(fd, json.data(), len, 8) != static_cast<ssize_t>(len)) {
      s = ErrnoError("read '" + path + "'", errno);
    }
  }
  ::close(fd);
  LOOM_RETURN_IF_ERROR(s);
  return ParseHeader(path, json, 8 + len, static_cast<uint64_t>(st.st_size) - 8 - len);
}

}  // namespace loom
