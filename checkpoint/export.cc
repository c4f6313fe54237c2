// Streaming safetensors export of consolidated weights.
#include "checkpoint/export.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/hf_llama.h"
#include "checkpoint/metadata_specs.h"
#include "checkpoint/reader.h"
#include "core/file_util.h"
#include "core/half.h"
#include "core/interrupt.h"
#include "model/layout.h"
#include "parallel/param_layout.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// One tensor of an export: rows [row0, row0 + shape[0]) of canonical tensor `loom` under `name`,
// or all of it stored transposed ([in, out]: shape is the transposed one).
struct OutTensor {
  std::string name, loom;
  int64_t row0 = 0;
  std::vector<int64_t> shape;
  bool transposed = false;

  uint64_t numel() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
  }
};

// Every tensor of `m` as the export names and lays it out, in storage order.
std::vector<OutTensor> OutTensors(const ModelConfig& m, bool hf) {
  std::vector<OutTensor> out;
  if (hf && m.llama()) {
    for (const HfLlamaTensor& t : HuggingFaceLlamaTensors(m)) {
      out.push_back({t.name, t.loom, t.row0, t.shape, false});
    }
    return out;
  }
  for (const ParamInfo& p : ModelLayout(m, 1).params) {
    OutTensor t{p.name, p.name, 0, {p.global_shape.begin(), p.global_shape.end()}, false};
    if (hf) t.name = HuggingFaceGpt2Name(p.name, &t.transposed);
    if (t.transposed) std::swap(t.shape[0], t.shape[1]);
    out.push_back(std::move(t));
  }
  return out;
}

// The header's __metadata__: format=pt (what transformers checks), where the weights came from,
// and the config (GPT-2's few sizes, or a Llama's config.json fields).
nlohmann::ordered_json HeaderMetadata(const proto::CheckpointMetadata& meta, const std::string& dir,
                                      bool hf, DType dtype) {
  const proto::ModelSpec& mo = meta.model();
  const ModelConfig model = ModelOf(mo);
  const char* naming = !hf ? "loom" : model.llama() ? "huggingface-llama" : "huggingface-gpt2";
  nlohmann::ordered_json md = {
      {"format", "pt"}, {"naming", naming}, {"source", dir}, {"step", std::to_string(meta.step())}};
  if (model.llama()) {
    for (const auto& [key, value] : HuggingFaceLlamaMetadata(model)) md[key] = value;
  } else {
    md["vocab_size"] = std::to_string(mo.vocab());
    md["n_positions"] = std::to_string(mo.max_seq());
    md["n_layer"] = std::to_string(mo.layers());
    md["n_head"] = std::to_string(mo.heads());
    md["n_embd"] = std::to_string(mo.hidden());
  }
  md["dtype"] = DTypeName(dtype);
  return md;
}

// Writes safetensors files of OutTensors read from one checkpoint, keeping the canonical tensor
// last read (Llama's k and v, gate and up, are slices of one).
class ExportWriter {
 public:
  ExportWriter(CheckpointReader* reader, const std::string& dir, DType dtype)
      : reader_(reader), dir_(dir), dtype_(dtype) {}

  // ts[begin, end) as one file at `tmp` (header, data, fsync), for the caller to rename to
  // `file`; adds them to *out. The caller removes `tmp` on failure.
  Status WriteFile(const std::vector<OutTensor>& ts, size_t begin, size_t end,
                   const nlohmann::ordered_json& metadata, const std::string& file,
                   const std::string& tmp, ExportResult* out) {
    // Header first: every tensor's place follows from the shapes.
    const uint64_t elem = DTypeSize(dtype_);
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    header["__metadata__"] = metadata;
    uint64_t at = 0;
    for (size_t i = begin; i < end; ++i) {
      const uint64_t n = ts[i].numel() * elem;
      header[ts[i].name] = {
          {"dtype", DTypeName(dtype_)}, {"shape", ts[i].shape}, {"data_offsets", {at, at + n}}};
      at += n;
    }
    std::string htext = header.dump();
    htext.append((8 - htext.size() % 8) % 8, ' ');
    const uint64_t hlen = htext.size();

    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoError("create '" + tmp + "'", errno);
    Status st = WriteAll(fd, {reinterpret_cast<const char*>(&hlen), 8}, tmp);
    if (st.ok()) st = WriteAll(fd, htext, tmp);
    for (size_t i = begin; i < end && st.ok(); ++i) {
      st = CheckInterrupted(("'" + file + "'").c_str());
      const float* data = nullptr;
      if (st.ok()) st = Data(ts[i], &data);
      if (!st.ok()) break;
      const size_t n = static_cast<size_t>(ts[i].numel());
      const void* bytes = data;
      if (dtype_ != DType::kF32) {
        narrow_.resize(n);
        if (dtype_ == DType::kBF16) ToBf16(data, narrow_.data(), n);
        if (dtype_ == DType::kF16) {
          // The index is the exported tensor's (GPT-2's linear weights are transposed).
          st = ToF16(data, narrow_.data(), n, dir_ + ": tensor '" + ts[i].name + "'");
          if (!st.ok()) break;
        }
        bytes = narrow_.data();
      }
      st = WriteAll(fd, {reinterpret_cast<const char*>(bytes), n * elem}, tmp);
      out->bytes += n * elem;
      ++out->tensors;
    }
    if (st.ok() && ::fsync(fd) != 0) st = ErrnoError("fsync '" + tmp + "'", errno);
    if (::close(fd) != 0 && st.ok()) st = ErrnoError("close '" + tmp + "'", errno);
    return st;
  }

 private:
  // The exported tensor's values in its layout.
  Status Data(const OutTensor& t, const float** data) {
    if (loaded_ != t.loom) {
      const ParamInfo& p = Param(t.loom);
      const Region r = WholeRegion(p);
      whole_.resize(static_cast<size_t>(r.flat_end));
      LOOM_RETURN_IF_ERROR(reader_->Read(p.name, StateKind::kParam, r, whole_.data()));
      loaded_ = t.loom;
    }
    if (!t.transposed) {  // rows [row0, ...) of a row-major [rows, cols]
      const uint64_t cols = t.shape.size() > 1 ? static_cast<uint64_t>(t.shape[1]) : 1;
      *data = whole_.data() + static_cast<uint64_t>(t.row0) * cols;
      return Status::Ok();
    }
    const int64_t rows = t.shape[1], cols = t.shape[0];  // the canonical [out, in]
    transposed_.resize(whole_.size());
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) transposed_[j * rows + i] = whole_[i * cols + j];
    }
    *data = transposed_.data();
    return Status::Ok();
  }

  const ParamInfo& Param(const std::string& name) {
    if (params_.empty()) {
      layout_ = ModelLayout(ModelOf(reader_->meta().model()), 1);
      for (const ParamInfo& p : layout_.params) params_[p.name] = &p;
    }
    return *params_.at(name);
  }

  CheckpointReader* reader_;
  const std::string dir_;
  const DType dtype_;
  ParamLayout layout_;
  std::map<std::string, const ParamInfo*> params_;
  std::string loaded_;  // the canonical tensor in whole_
  std::vector<float> whole_, transposed_;
  std::vector<uint16_t> narrow_;
};

// `path`, or where the links it names lead: a link is written through (the rename would replace
// the link itself), also one whose target does not exist yet.
std::string ThroughLinks(const std::string& path) {
  std::error_code ec;
  fs::path target = path;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    const fs::path next = fs::read_symlink(target, ec);
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  return target.lexically_normal().string();
}

std::string TempName(const std::string& file) {
  return file + ".tmp." + std::to_string(::getpid());
}

std::string ParentDir(const std::string& file) {
  const std::string parent = fs::path(file).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

void ToBf16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBf16(in[i]);
}

Status ToF16(const float* in, uint16_t* out, size_t n, const std::string& what) {
  for (size_t i = 0; i < n; ++i) {
    out[i] = FloatToF16(in[i]);
    if (std::isinf(F16ToFloat(out[i])) && std::isfinite(in[i])) {
      return InvalidArgument(what + ": element " + std::to_string(i) + " is " +
                             std::to_string(in[i]) +
                             ", beyond float16's range (65504); export as bf16 or f32");
    }
  }
  return Status::Ok();
}

std::string HuggingFaceGpt2Name(const std::string& name, bool* transposed) {
  *transposed = EndsWith(name, "c_attn.weight") || EndsWith(name, "c_proj.weight") ||
                EndsWith(name, "c_fc.weight");
  if (name == "wte" || name == "wpe") return name + ".weight";
  return name;  // h.{l}.* and ln_f.* already carry GPT-2's names
}

Result<ExportResult> ExportSafetensors(const std::string& src, const std::string& out_file,
                                       ExportNames names, DType dtype) {
  LOOM_ASSIGN_OR_RETURN(std::string dir, ResolveCheckpointDir(src));
  LOOM_RETURN_IF_ERROR(CheckNotTemporary(dir));
  const std::string file = ThroughLinks(out_file);
  LOOM_RETURN_IF_ERROR(CheckOutputFile(file, "", "output file"));
  LOOM_RETURN_IF_ERROR(CheckOutsideCheckpoints(file, dir, "output file"));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::Open(dir));
  const proto::CheckpointMetadata& meta = reader->meta();
  const bool hf = names == ExportNames::kHuggingFace;
  const std::vector<OutTensor> tensors = OutTensors(ModelOf(meta.model()), hf);
  ExportResult out;
  out.family = ModelOf(meta.model()).family;
  ExportWriter writer(reader.get(), dir, dtype);
  const std::string tmp = TempName(file);
  Status st = writer.WriteFile(tensors, 0, tensors.size(), HeaderMetadata(meta, dir, hf, dtype),
                               file, tmp, &out);
  if (st.ok() && ::rename(tmp.c_str(), file.c_str()) != 0) {
    st = ErrnoError("rename '" + tmp + "' to '" + file + "'", errno);
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  LOOM_RETURN_IF_ERROR(FsyncDir(ParentDir(file)));
  out.dir = dir;
  out.files = {out_file};
  return out;
}

namespace {

// GPT-2's config.json: the keys GPT2Config reads; the values are the model Loom trains
// (docs/CHECKPOINT.md).
std::string Gpt2ConfigJson(const proto::ModelSpec& mo, DType dtype) {
  const char* torch_dtype = dtype == DType::kBF16  ? "bfloat16"
                            : dtype == DType::kF16 ? "float16"
                                                   : "float32";
  const nlohmann::ordered_json config = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", mo.vocab()},
      {"n_positions", mo.max_seq()},
      {"n_ctx", mo.max_seq()},
      {"n_embd", mo.hidden()},
      {"n_layer", mo.layers()},
      {"n_head", mo.heads()},
      {"n_inner", nullptr},                 // 4 * n_embd
      {"activation_function", "gelu_new"},  // GELU with the tanh approximation
      {"layer_norm_epsilon", 1e-5},
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"initializer_range", 0.02},
      {"scale_attn_weights", true},
      {"tie_word_embeddings", true},
      {"torch_dtype", torch_dtype},
  };
  return config.dump(2) + "\n";
}

// One file of a Hugging Face directory: its name there, where it is written (through a link)
// and its temporary name.
struct DirFile {
  std::string name, path, tmp;
};

}  // namespace

Result<ExportResult> ExportHuggingFaceDir(const std::string& src, const std::string& out_dir,
                                          DType dtype, uint64_t max_shard_bytes,
                                          const HfExtras& extras) {
  std::error_code ec;
  const bool existed = fs::exists(out_dir, ec);
  if (existed && !fs::is_directory(out_dir, ec)) {
    return InvalidArgument("--hf-dir '" + out_dir + "': exists and is not a directory");
  }
  LOOM_ASSIGN_OR_RETURN(std::string dir, ResolveCheckpointDir(src));
  LOOM_RETURN_IF_ERROR(CheckNotTemporary(dir));
  LOOM_RETURN_IF_ERROR(CheckOutsideCheckpoints(out_dir, dir, "--hf-dir"));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::Open(dir));
  const proto::CheckpointMetadata& meta = reader->meta();
  const ModelConfig model = ModelOf(meta.model());
  const std::string config_text = model.llama() ? HuggingFaceLlamaConfigJson(model, dtype)
                                                : Gpt2ConfigJson(meta.model(), dtype);
  const std::vector<OutTensor> tensors = OutTensors(model, /*hf=*/true);
  if (extras.byte_tokenizer && model.vocab < kByteVocab) {
    return InvalidArgument("the byte-level tokenizer has " + std::to_string(kByteVocab) +
                           " tokens; the model's vocabulary (" + dir + ") has " +
                           std::to_string(model.vocab));
  }
  // Beside the weights: name and text, renamed after them and before config.json.
  std::vector<std::pair<std::string, std::string>> extra_files;
  GenerationDefaults generation = extras.generation;
  if (generation.max_length <= 0) generation.max_length = model.max_seq;
  extra_files.emplace_back(kHfGenerationConfigFile, GenerationConfigJson(generation));
  if (extras.byte_tokenizer) {
    extra_files.emplace_back(kHfTokenizerFile, ByteTokenizerJson());
    extra_files.emplace_back(kHfTokenizerConfigFile, ByteTokenizerConfigJson(model.max_seq));
  }

  // The shards, save_pretrained's way; one is model.safetensors, without an index.
  std::vector<uint64_t> bytes;
  for (const OutTensor& t : tensors) bytes.push_back(t.numel() * DTypeSize(dtype));
  std::vector<size_t> first = PlanShards(bytes, max_shard_bytes);
  const size_t shards = first.size();
  first.push_back(tensors.size());
  auto file = [&](const std::string& name) {
    const std::string path = ThroughLinks(JoinPath(out_dir, name));
    return DirFile{name, path, TempName(path)};
  };
  // The weights, the index if sharded, the extras, config.json: renamed in this order.
  std::vector<DirFile> files;
  for (size_t s = 0; s < shards; ++s) {
    files.push_back(file(shards == 1 ? kHfSingleFile : ShardFileName(s, shards)));
  }
  if (shards > 1) files.push_back(file(kHfIndexFile));
  const size_t first_extra = files.size();
  for (const auto& [name, text] : extra_files) files.push_back(file(name));
  files.push_back(file("config.json"));
  for (const DirFile& f : files) {
    LOOM_RETURN_IF_ERROR(CheckOutputFile(f.path, "", "--hf-dir"));
    LOOM_RETURN_IF_ERROR(CheckOutsideCheckpoints(f.path, dir, "--hf-dir"));
  }
  LOOM_RETURN_IF_ERROR(MakeDirs(out_dir));

  ExportResult result;
  result.family = model.family;
  ExportWriter writer(reader.get(), dir, dtype);
  const nlohmann::ordered_json metadata = HeaderMetadata(meta, dir, /*hf=*/true, dtype);
  // config.json first, as before the weights existed the directory had its old pair.
  Status st = WriteFileAtomic(files.back().tmp, config_text);
  for (size_t i = 0; i < extra_files.size() && st.ok(); ++i) {
    st = WriteFileAtomic(files[first_extra + i].tmp, extra_files[i].second);
  }
  std::map<std::string, std::string> weight_map;
  for (size_t s = 0; s < shards && st.ok(); ++s) {
    st = writer.WriteFile(tensors, first[s], first[s + 1], metadata, files[s].path, files[s].tmp,
                          &result);
    for (size_t i = first[s]; i < first[s + 1]; ++i) weight_map[tensors[i].name] = files[s].name;
    result.files.push_back(files[s].name);
  }
  if (st.ok() && shards > 1) {
    uint64_t total = 0;
    for (uint64_t b : bytes) total += b;
    st = WriteFileAtomic(files[shards].tmp, ShardIndexJson(total, weight_map));
  }
  std::set<std::string> dirs;
  for (size_t i = 0; i < files.size() && st.ok(); ++i) {
    if (::rename(files[i].tmp.c_str(), files[i].path.c_str()) != 0) {
      st = ErrnoError("rename '" + files[i].tmp + "' to '" + files[i].path + "'", errno);
    }
    dirs.insert(ParentDir(files[i].path));
  }
  if (!st.ok()) {
    for (const DirFile& f : files) fs::remove(f.tmp, ec);
    if (!existed) fs::remove(out_dir, ec);  // only if empty
    return st;
  }
  // Weight files of an earlier export that this one replaced by others: from_pretrained reads
  // model.safetensors before an index, so a stale one would shadow these.
  std::set<std::string> written;
  for (const DirFile& f : files) written.insert(f.name);
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(out_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (IsHfWeightsFileName(name) && !written.count(name)) stale.push_back(e.path());
  }
  for (const fs::path& f : stale) {
    fs::remove(f, ec);
    if (ec) return ErrnoError("remove an earlier export's '" + f.string() + "'", ec.value());
  }
  dirs.insert(out_dir);
  for (const std::string& d : dirs) LOOM_RETURN_IF_ERROR(FsyncDir(d));
  result.dir = dir;
  result.tokenizer = extras.byte_tokenizer;
  return result;
}

void RemoveExportLeftovers(const std::string& path) {
  std::error_code ec;
  fs::path target(path);
  if (!target.has_filename()) target = target.parent_path();  // "hf/"
  // The regular files of `dir` named "<base>.tmp.<...>" for a base that `ours` accepts.
  auto sweep = [&ec](const fs::path& dir, const auto& ours) {
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec)) {
      const std::string name = e.path().filename().string();
      const size_t at = name.rfind(".tmp.");
      if (at != std::string::npos && at + 5 < name.size() && ours(name.substr(0, at)) &&
          e.is_regular_file(ec)) {
        found.push_back(e.path());
      }
    }
    for (const fs::path& f : found) fs::remove(f, ec);
  };
  const std::string own = target.filename().string();
  sweep(target.parent_path(), [&own](const std::string& base) {
    return base == own || base.rfind(own + ".tmp.", 0) == 0;
  });
  if (fs::is_directory(target, ec)) {
    sweep(target, [](const std::string& base) {
      // WriteFileAtomic's own temporary of a temporary: config.json.tmp.<pid>.tmp.<pid>
      const std::string b = base.substr(0, base.find(".tmp."));
      return b == "config.json" || b == kHfGenerationConfigFile || b == kHfTokenizerFile ||
             b == kHfTokenizerConfigFile || IsHfWeightsFileName(b);
    });
  }
}

}  // namespace loom
