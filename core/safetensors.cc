// Safetensors writer/reader on nlohmann::json.
#include "core/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>

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

Result<SafetensorsFile> ReadSafetensors(const std::string& path) {
  LOOM_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  auto bad = [&](const std::string& what) {
    return DataLoss("safetensors '" + path + "': " + what);
  };
  if (bytes.size() < 8) return bad("file is " + std::to_string(bytes.size()) + " bytes, no header");
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  if (len > bytes.size() - 8) {
    return bad("header length " + std::to_string(len) + " exceeds file size " +
               std::to_string(bytes.size()));
  }
  nlohmann::json header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + len, nullptr,
                                                /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return bad("header is not a JSON object");
  const size_t data_begin = 8 + len, data_size = bytes.size() - data_begin;
  SafetensorsFile out;
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
    Shape shape;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned())
        return bad("tensor '" + name + "': shape must be non-negative integers");
      shape.push_back(d.get<int64_t>());
    }
    if (!e["data_offsets"][0].is_number_unsigned() || !e["data_offsets"][1].is_number_unsigned()) {
      return bad("tensor '" + name + "': data_offsets must be non-negative integers");
    }
    uint64_t b = e["data_offsets"][0].get<uint64_t>(), en = e["data_offsets"][1].get<uint64_t>();
    size_t expect = static_cast<size_t>(NumElements(shape)) * DTypeSize(*dtype);
    if (en < b || en > data_size || en - b != expect) {
      return bad("tensor '" + name + "': data_offsets [" + std::to_string(b) + ", " +
                 std::to_string(en) + ") do not hold " + std::to_string(expect) + " bytes of " +
                 DTypeName(*dtype) + ShapeToString(shape) + " within " + std::to_string(data_size) +
                 " data bytes (truncated file?)");
    }
    LOOM_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros(shape, *dtype, MemTag::kOther));
    std::memcpy(t.raw(), bytes.data() + data_begin + b, expect);
    out.tensors.emplace(name, std::move(t));
  }
  return out;
}

}  // namespace loom
