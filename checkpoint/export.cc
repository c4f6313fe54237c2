// Streaming safetensors export of consolidated weights.
#include "checkpoint/export.h"
#include "checkpoint/metadata_specs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "checkpoint/reader.h"
#include "core/file_util.h"
#include "core/half.h"
#include "core/interrupt.h"
#include "model/layout.h"
#include "parallel/param_layout.h"

namespace loom {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
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
  // A link is written through (the rename below would replace the link itself), also one whose
  // target does not exist yet.
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path target = out_file;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    const fs::path next = fs::read_symlink(target, ec);
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  const std::string file = target.lexically_normal().string();
  LOOM_RETURN_IF_ERROR(CheckOutputFile(file, "", "output file"));
  LOOM_RETURN_IF_ERROR(CheckOutsideCheckpoints(file, dir, "output file"));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointReader> reader, CheckpointReader::Open(dir));
  const proto::CheckpointMetadata& meta = reader->meta();
  const proto::ModelSpec& mo = meta.model();
  const ParamLayout canonical = ModelLayout(ModelOf(mo), 1);
  const bool hf = names == ExportNames::kHuggingFaceGpt2;
  if (hf && mo.arch() != "gpt2") {
    return Unimplemented(
        dir + ": a " + mo.arch() +
        " checkpoint has no Hugging Face GPT-2 names; export it with Loom's names");
  }
  // Header first: every tensor's place follows from the shapes.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"},
                            {"naming", hf ? "huggingface-gpt2" : "loom"},
                            {"source", dir},
                            {"step", std::to_string(meta.step())},
                            {"vocab_size", std::to_string(mo.vocab())},
                            {"n_positions", std::to_string(mo.max_seq())},
                            {"n_layer", std::to_string(mo.layers())},
                            {"n_head", std::to_string(mo.heads())},
                            {"n_embd", std::to_string(mo.hidden())},
                            {"dtype", DTypeName(dtype)}};
  const uint64_t elem = DTypeSize(dtype);
  uint64_t at = 0;
  for (const ParamInfo& p : canonical.params) {
    bool transposed = false;
    const std::string out_name = hf ? HuggingFaceGpt2Name(p.name, &transposed) : p.name;
    std::vector<int64_t> shape(p.global_shape.begin(), p.global_shape.end());
    if (transposed) std::swap(shape[0], shape[1]);
    const uint64_t n = static_cast<uint64_t>(p.numel()) * elem;
    header[out_name] = {
        {"dtype", DTypeName(dtype)}, {"shape", shape}, {"data_offsets", {at, at + n}}};
    at += n;
  }
  std::string htext = header.dump();
  htext.append((8 - htext.size() % 8) % 8, ' ');
  const uint64_t hlen = htext.size();

  const std::string tmp = file + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("create '" + tmp + "'", errno);
  Status st = WriteAll(fd, {reinterpret_cast<const char*>(&hlen), 8}, tmp);
  if (st.ok()) st = WriteAll(fd, htext, tmp);
  ExportResult out;
  std::vector<float> buf, transposed_buf;
  std::vector<uint16_t> narrow;
  for (const ParamInfo& p : canonical.params) {
    if (st.ok()) st = CheckInterrupted(("'" + file + "'").c_str());
    if (!st.ok()) break;
    const Region r = WholeRegion(p);
    buf.resize(static_cast<size_t>(r.flat_end));
    st = reader->Read(p.name, StateKind::kParam, r, buf.data());
    if (!st.ok()) break;
    bool transposed = false;
    const std::string out_name = hf ? HuggingFaceGpt2Name(p.name, &transposed) : p.name;
    const float* data = buf.data();
    if (transposed) {
      transposed_buf.resize(buf.size());
      for (int64_t i = 0; i < r.rows; ++i) {
        for (int64_t j = 0; j < r.cols; ++j) transposed_buf[j * r.rows + i] = buf[i * r.cols + j];
      }
      data = transposed_buf.data();
    }
    const void* bytes = data;
    if (dtype != DType::kF32) {
      narrow.resize(buf.size());
      if (dtype == DType::kBF16) ToBf16(data, narrow.data(), buf.size());
      if (dtype == DType::kF16) {
        // The index is the exported tensor's (Hugging Face linear weights are transposed).
        st = ToF16(data, narrow.data(), buf.size(), dir + ": tensor '" + out_name + "'");
        if (!st.ok()) break;
      }
      bytes = narrow.data();
    }
    st = WriteAll(fd, {reinterpret_cast<const char*>(bytes), buf.size() * elem}, tmp);
    out.bytes += buf.size() * elem;
    ++out.tensors;
  }
  if (st.ok() && ::fsync(fd) != 0) st = ErrnoError("fsync '" + tmp + "'", errno);
  if (::close(fd) != 0 && st.ok()) st = ErrnoError("close '" + tmp + "'", errno);
  if (st.ok() && ::rename(tmp.c_str(), file.c_str()) != 0) {
    st = ErrnoError("rename '" + tmp + "' to '" + file + "'", errno);
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  const std::string parent = std::filesystem::path(file).parent_path().string();
  LOOM_RETURN_IF_ERROR(FsyncDir(parent.empty() ? "." : parent));
  out.dir = dir;
  return out;
}

Result<ExportResult> ExportHuggingFaceDir(const std::string& src, const std::string& out_dir,
                                          DType dtype) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool existed = fs::exists(out_dir, ec);
  if (existed && !fs::is_directory(out_dir, ec)) {
    return InvalidArgument("--hf-dir '" + out_dir + "': exists and is not a directory");
  }
  LOOM_ASSIGN_OR_RETURN(std::string dir, ResolveCheckpointDir(src));
  LOOM_RETURN_IF_ERROR(CheckOutsideCheckpoints(out_dir, dir, "--hf-dir"));
  LOOM_ASSIGN_OR_RETURN(proto::CheckpointMetadata meta, ReadMetadata(dir));
  const proto::ModelSpec& mo = meta.model();
  const char* torch_dtype = dtype == DType::kBF16  ? "bfloat16"
                            : dtype == DType::kF16 ? "float16"
                                                   : "float32";
  // The keys GPT2Config reads; the values are the model Loom trains (docs/CHECKPOINT.md).
  nlohmann::ordered_json config = {
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
  const std::string model = JoinPath(out_dir, "model.safetensors");
  const std::string config_file = JoinPath(out_dir, "config.json");
  LOOM_RETURN_IF_ERROR(CheckOutputFile(config_file, "", "--hf-dir"));
  LOOM_RETURN_IF_ERROR(MakeDirs(out_dir));
  // The config is written first under a temporary name and renamed after the model, so a
  // failure on the way leaves the directory's old pair as it was.
  const std::string config_tmp = config_file + ".tmp." + std::to_string(::getpid());
  Status st = WriteFileAtomic(config_tmp, config.dump(2) + "\n");
  ExportResult result;
  if (st.ok()) {
    Result<ExportResult> r = ExportSafetensors(dir, model, ExportNames::kHuggingFaceGpt2, dtype);
    st = r.status();
    if (r.ok()) result = *r;
  }
  if (st.ok() && ::rename(config_tmp.c_str(), config_file.c_str()) != 0) {
    st = ErrnoError("rename '" + config_tmp + "' to '" + config_file + "'", errno);
  }
  if (st.ok()) st = FsyncDir(out_dir);
  if (!st.ok()) {
    fs::remove(config_tmp, ec);
    if (!existed) fs::remove(out_dir, ec);  // only if empty
    return st;
  }
  return result;
}

void RemoveExportLeftovers(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path target(path);
  if (!target.has_filename()) target = target.parent_path();  // "hf/"
  auto sweep = [&ec](const fs::path& dir, const std::string& prefix) {
    for (const auto& e : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() > prefix.size() && name.rfind(prefix, 0) == 0 && e.is_regular_file(ec)) {
        fs::remove(e.path(), ec);
      }
    }
  };
  sweep(target.parent_path(), target.filename().string() + ".tmp.");
  if (fs::is_directory(target, ec)) {
    sweep(target, "model.safetensors.tmp.");
    sweep(target, "config.json.tmp.");
  }
}

}  // namespace loom
