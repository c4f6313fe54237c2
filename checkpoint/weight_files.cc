// One safetensors file or a sharded set, read a tensor at a time.
#include "checkpoint/weight_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "checkpoint/hf_shards.h"
#include "core/file_util.h"

namespace loom {

namespace fs = std::filesystem;

Result<std::unique_ptr<WeightFiles>> WeightFiles::Open(const std::string& path) {
  std::unique_ptr<WeightFiles> w(new WeightFiles());
  w->path_ = path;
  if (fs::path(path).extension() != ".json") {
    LOOM_ASSIGN_OR_RETURN(SafetensorsHeader header, ReadSafetensorsHeader(path));
    LOOM_RETURN_IF_ERROR(w->Add(path, std::move(header), nullptr, ""));
    return w;
  }
  w->sharded_ = true;
  LOOM_ASSIGN_OR_RETURN(const std::string text, ReadRegularFile(path, 64 << 20));
  LOOM_ASSIGN_OR_RETURN(const ShardIndex index, ParseShardIndex(text, path));
  std::map<std::string, std::vector<std::string>> by_file;  // sorted: model-00001-... first
  for (const auto& [tensor, file] : index.weight_map) by_file[file].push_back(tensor);
  const fs::path dir = fs::path(path).parent_path();
  for (const auto& [file, names] : by_file) {
    const std::string shard = (dir / file).string();
    std::error_code ec;
    if (!fs::exists(shard, ec)) {
      return NotFound(path + ": field 'weight_map': tensor '" + names.front() + "' is in '" + file +
                      "', which does not exist (expected " + shard + ")");
    }
    LOOM_ASSIGN_OR_RETURN(SafetensorsHeader header, ReadSafetensorsHeader(shard));
    LOOM_RETURN_IF_ERROR(w->Add(shard, std::move(header), &names, path));
  }
  return w;
}

WeightFiles::~WeightFiles() {
  for (const File& f : files_) {
    if (f.fd >= 0) ::close(f.fd);
  }
}

Status WeightFiles::Add(const std::string& path, SafetensorsHeader header,
                        const std::vector<std::string>* expected, const std::string& index) {
  for (const auto& [name, e] : header.tensors) {
    if (e.dtype != DType::kF32 && e.dtype != DType::kF16 && e.dtype != DType::kBF16) {
      return InvalidArgument(path + ": tensor '" + name + "': field 'dtype': expected F32, F16 " +
                             "or BF16, got '" + DTypeName(e.dtype) + "'");
    }
  }
  if (expected != nullptr) {
    for (const std::string& name : *expected) {
      if (!header.tensors.count(name)) {
        return DataLoss(path + ": tensor '" + name + "' is missing (" + index +
                        " places it in this file)");
      }
    }
    const std::set<std::string> listed(expected->begin(), expected->end());
    for (const auto& [name, e] : header.tensors) {
      if (!listed.count(name)) {
        return DataLoss(path + ": tensor '" + name + "' is not in " + index +
                        "'s weight_map for this file (a shard of another model?)");
      }
    }
  }
  File f{path, ::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return ErrnoError("open '" + path + "'", errno);
  files_.push_back(f);
  if (files_.size() == 1) metadata_ = header.metadata;
  for (auto& [name, e] : header.tensors) {
    file_of_[name] = files_.size() - 1;
    tensors_.emplace(name, std::move(e));
  }
  return Status::Ok();
}

const std::string& WeightFiles::FileOf(const std::string& name) const {
  return files_[file_of_.at(name)].path;
}

Status WeightFiles::Read(const std::string& name, std::vector<float>* out) const {
  const SafetensorsEntry& e = tensors_.at(name);
  const File& f = files_[file_of_.at(name)];
  std::vector<char> raw(e.bytes);
  for (size_t at = 0; at < raw.size();) {
    const ssize_t r =
        ::pread(f.fd, raw.data() + at, raw.size() - at, static_cast<off_t>(e.offset + at));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return ErrnoError("read '" + f.path + "' tensor '" + name + "'", r < 0 ? errno : EIO);
    at += static_cast<size_t>(r);
  }
  const size_t n = raw.size() / DTypeSize(e.dtype);
  out->resize(n);
  if (e.dtype == DType::kF32) {
    std::memcpy(out->data(), raw.data(), raw.size());
    return Status::Ok();
  }
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, raw.data() + 2 * i, 2);
    if (e.dtype == DType::kBF16) {
      const uint32_t u = static_cast<uint32_t>(h) << 16;
      std::memcpy(&(*out)[i], &u, 4);
    } else {
      _Float16 f16;
      std::memcpy(&f16, &h, 2);
      (*out)[i] = static_cast<float>(f16);
    }
  }
  return Status::Ok();
}

}  // namespace loom
