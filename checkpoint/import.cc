// Streaming import of GPT-2 weights from safetensors into a step-0 checkpoint.
#include "checkpoint/import.h"

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
#include <vector>

#include "checkpoint/export.h"
#include "checkpoint/format.h"
#include "checkpoint/shard_plan.h"
#include "checkpoint/writer.h"
#include "core/file_util.h"
#include "core/interrupt.h"
#include "core/safetensors.h"
#include "core/version.h"
#include "parallel/layout.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// A safetensors file read a tensor at a time (core/safetensors.h checks its header), each
// widened to fp32.
class TensorReader {
 public:
  static Result<std::unique_ptr<TensorReader>> Open(const std::string& path) {
    LOOM_ASSIGN_OR_RETURN(SafetensorsHeader header, ReadSafetensorsHeader(path));
    for (const auto& [name, e] : header.tensors) {
      if (e.dtype != DType::kF32 && e.dtype != DType::kF16 && e.dtype != DType::kBF16) {
        return InvalidArgument(path + ": tensor '" + name + "': field 'dtype': expected F32, F16 " +
                               "or BF16, got '" + DTypeName(e.dtype) + "'");
      }
    }
    std::unique_ptr<TensorReader> r(new TensorReader(path, std::move(header)));
    r->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (r->fd_ < 0) return ErrnoError("open '" + path + "'", errno);
    return r;
  }
  ~TensorReader() {
    if (fd_ >= 0) ::close(fd_);
  }

  const std::map<std::string, SafetensorsEntry>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }

  Status Read(const std::string& name, std::vector<float>* out) const {
    const SafetensorsEntry& e = header_.tensors.at(name);
    std::vector<char> raw(e.bytes);
    for (size_t at = 0; at < raw.size();) {
      const ssize_t r =
          ::pread(fd_, raw.data() + at, raw.size() - at, static_cast<off_t>(e.offset + at));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        return ErrnoError("read '" + path_ + "' tensor '" + name + "'", r < 0 ? errno : EIO);
      }
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
        _Float16 f;
        std::memcpy(&f, &h, 2);
        (*out)[i] = static_cast<float>(f);
      }
    }
    return Status::Ok();
  }

 private:
  TensorReader(std::string path, SafetensorsHeader header)
      : path_(std::move(path)), header_(std::move(header)) {}
  std::string path_;
  SafetensorsHeader header_;
  int fd_ = -1;
};

}  // namespace

Result<ImportResult> ImportSafetensors(const std::string& input, const std::string& out_root,
                                       int64_t heads, const std::string& heads_name) {
  // A Hugging Face model directory (as the hub ships GPT-2, or as `export --hf-dir` writes it):
  // its model.safetensors, and the heads from its config.json when the file does not say.
  std::string file = input, config;
  int64_t config_heads = 0;
  std::error_code ec;
  if (fs::is_directory(input, ec)) {
    file = JoinPath(input, "model.safetensors");
    if (!fs::is_regular_file(file, ec)) {
      return InvalidArgument(input + ": a directory without model.safetensors: expected a " +
                             "safetensors file or a Hugging Face model directory holding one " +
                             "(sharded model-*-of-*.safetensors are not supported)");
    }
    config = JoinPath(input, "config.json");
    if (fs::exists(config, ec)) {
      LOOM_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(config, 1 << 20));
      const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object()) {
        return InvalidArgument(config + ": not a JSON object");
      }
      if (j.contains("n_head")) {
        const nlohmann::json& n = j["n_head"];
        if (!n.is_number_integer() || n.get<int64_t>() <= 0) {
          return InvalidArgument(config + ": field 'n_head': expected a positive integer, got " +
                                 n.dump());
        }
        config_heads = n.get<int64_t>();
      }
    }
  }
  if (heads != 0 && config_heads != 0 && heads != config_heads) {
    return InvalidArgument(config + ": " + heads_name + " " + std::to_string(heads) +
                           " contradicts field 'n_head' " + std::to_string(config_heads));
  }
  // Where the head count came from, for a contradiction with the file's own metadata.
  const std::string heads_from = heads != 0
                                     ? heads_name + " " + std::to_string(heads)
                                     : config + ": field 'n_head' " + std::to_string(config_heads);
  if (heads == 0) heads = config_heads;
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<TensorReader> reader, TensorReader::Open(file));
  const TensorReader& ix = *reader;
  const auto& entries = ix.tensors();
  auto meta_it = ix.metadata().find("naming");
  const bool loom_names = (meta_it != ix.metadata().end() && meta_it->second == "loom") ||
                          (entries.count("wte") && !entries.count("wte.weight"));
  // The file's name of each tensor, under Hugging Face's optional `transformer.` prefix.
  const std::string prefix =
      !loom_names && entries.count("transformer.wte.weight") ? "transformer." : "";
  auto find = [&](const std::string& name) -> const SafetensorsEntry* {
    auto it = entries.find(prefix + name);
    return it == entries.end() ? nullptr : &it->second;
  };
  const SafetensorsEntry* wte = find(loom_names ? "wte" : "wte.weight");
  const SafetensorsEntry* wpe = find(loom_names ? "wpe" : "wpe.weight");
  if (wte == nullptr || wpe == nullptr || wte->shape.size() != 2 || wpe->shape.size() != 2) {
    return InvalidArgument(file + ": expected GPT-2 weights: tensors '" + prefix +
                           (loom_names ? "wte' and 'wpe'" : "wte.weight' and 'wpe.weight'") +
                           " of two dimensions");
  }
  ImportResult out;
  ModelConfig& model = out.model;
  model.vocab = wte->shape[0];
  model.hidden = wte->shape[1];
  model.max_seq = wpe->shape[0];
  std::set<int64_t> layer_ids;
  for (const auto& [name, e] : entries) {
    long long l = -1;
    if (name.rfind(prefix + "h.", 0) == 0 &&
        std::sscanf(name.c_str() + prefix.size(), "h.%lld.", &l) == 1) {
      layer_ids.insert(l);
    }
  }
  model.layers = static_cast<int64_t>(layer_ids.size());
  if (model.vocab <= 0 || model.hidden <= 0 || model.max_seq <= 0) {
    return InvalidArgument(file + ": tensors '" + prefix + (loom_names ? "wte' " : "wte.weight' ") +
                           ShapeToString(wte->shape) + " and '" + prefix +
                           (loom_names ? "wpe' " : "wpe.weight' ") + ShapeToString(wpe->shape) +
                           ": expected [vocab, hidden] and [max_seq, hidden], all above zero");
  }
  const auto n_head = ix.metadata().find("n_head");
  if (n_head != ix.metadata().end()) {
    const std::string& v = n_head->second;
    char* end = nullptr;
    const long long in_file = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || in_file <= 0) {
      return InvalidArgument(
          file + ": metadata field 'n_head': expected a positive integer, got '" + v + "'");
    }
    if (heads != 0 && heads != in_file) {
      return InvalidArgument(file + ": " + heads_from + " contradicts the file's metadata n_head " +
                             v);
    }
    heads = in_file;
  } else if (heads == 0) {
    return InvalidArgument(file +
                           ": the number of attention heads is not in the file's "
                           "metadata (n_head): give it with --heads");
  }
  model.heads = heads;
  if (model.layers == 0 || heads <= 0 || model.hidden % heads != 0) {
    return InvalidArgument(file + ": a GPT-2 of " + std::to_string(model.layers) +
                           " layers, hidden " + std::to_string(model.hidden) + " and " +
                           std::to_string(heads) + " heads: expected at least one layer and a " +
                           "hidden size divisible by the heads");
  }
  // Every tensor of that model, by the file's name and layout.
  const ParamLayout canonical = ParamLayout::ForModel(model, 1);
  std::map<std::string, std::pair<std::string, bool>> file_name;  // canonical -> (name, transposed)
  std::set<std::string> used;
  for (const ParamInfo& p : canonical.params) {
    bool transposed = false;
    const std::string name = loom_names ? p.name : HuggingFaceGpt2Name(p.name, &transposed);
    const SafetensorsEntry* e = find(name);
    std::vector<int64_t> want(p.global_shape.begin(), p.global_shape.end());
    if (transposed) std::swap(want[0], want[1]);
    if (e == nullptr) {
      return DataLoss(file + ": tensor '" + prefix + name + "' " + ShapeToString(want) +
                      " is missing (a GPT-2 of " + std::to_string(model.layers) + " layers)");
    }
    if (e->shape != want) {
      return DataLoss(file + ": tensor '" + prefix + name + "': field 'shape' is " +
                      ShapeToString(e->shape) + ", expected " + ShapeToString(want));
    }
    file_name[p.name] = {prefix + name, transposed};
    used.insert(prefix + name);
  }
  std::vector<float> a, b;
  for (const auto& [name, e] : entries) {
    if (used.count(name)) continue;
    long long l = -1;
    char tail[32] = {};
    const bool buffer =
        !loom_names &&
        std::sscanf(name.c_str() + prefix.size(), "h.%lld.attn.%31s", &l, tail) == 2 &&
        (std::strcmp(tail, "bias") == 0 || std::strcmp(tail, "masked_bias") == 0);
    if (buffer) {
      ++out.skipped;
      continue;
    }
    if (name == "lm_head.weight" && !loom_names) {  // tied: must be wte itself
      LOOM_RETURN_IF_ERROR(ix.Read(name, &a));
      LOOM_RETURN_IF_ERROR(ix.Read(prefix + "wte.weight", &b));
      const bool same = e.shape == wte->shape && a.size() == b.size() &&
                        std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
      std::vector<float>().swap(a);  // the two copies are not kept while writing
      std::vector<float>().swap(b);
      if (!same) {
        return InvalidArgument(file + ": tensor 'lm_head.weight' differs from '" + prefix +
                               "wte.weight': Loom's GPT-2 ties the head to the embedding");
      }
      ++out.skipped;
      continue;
    }
    return InvalidArgument(file + ": tensor '" + name + "' is not part of a GPT-2 of " +
                           std::to_string(model.layers) + " layers (" +
                           (loom_names ? "Loom" : "Hugging Face") + " names)");
  }

  LOOM_ASSIGN_OR_RETURN(const OutputRoot root, OutputRoot::Open(out_root, ""));
  Layout lay;  // one rank
  const RankShardPlan plan = PlanRank(model, lay, 0);
  const std::string tmp = TempStepDir(out_root, 0);
  std::string loaded;  // the tensor in `current`, canonical name
  std::vector<float> current, raw;
  auto source = [&](StateKind s, size_t k, std::vector<float>* scratch) -> Result<const float*> {
    const Piece& p = plan.writes[k];
    if (s != StateKind::kParam) {  // AdamW starts from zero moments
      scratch->assign(static_cast<size_t>(p.region.size()), 0.0f);
      return static_cast<const float*>(scratch->data());
    }
    const ParamInfo& info = plan.layout.params[static_cast<size_t>(p.param)];
    const Region whole = WholeRegion(info);
    if (loaded != info.name) {
      LOOM_RETURN_IF_ERROR(CheckInterrupted("the imported checkpoint"));
      const auto& [name, transposed] = file_name.at(info.name);
      LOOM_RETURN_IF_ERROR(ix.Read(name, transposed ? &raw : &current));
      const std::vector<float>& got = transposed ? raw : current;
      for (size_t i = 0; i < got.size(); ++i) {
        if (!std::isfinite(got[i])) {
          return DataLoss(file + ": tensor '" + name + "' element " + std::to_string(i) + " is " +
                          (std::isnan(got[i]) ? "NaN" : "infinite") +
                          ": expected finite weights to train from");
        }
      }
      if (transposed) {  // [in, out] -> [out, in]
        current.resize(raw.size());
        for (int64_t i = 0; i < whole.rows; ++i) {
          for (int64_t j = 0; j < whole.cols; ++j)
            current[i * whole.cols + j] = raw[j * whole.rows + i];
        }
      }
      loaded = info.name;
      ++out.tensors;
    }
    // The piece's box of the [out, in] matrix (the fused QKV weight is written in blocks), and
    // a flat range inside it.
    const Region& g = p.region;
    if (g.col0 == 0 && g.cols == whole.cols) {
      return static_cast<const float*>(current.data()) + g.row0 * whole.cols + g.flat_begin;
    }
    scratch->resize(static_cast<size_t>(g.size()));
    for (int64_t f = g.flat_begin; f < g.flat_end; ++f) {
      (*scratch)[static_cast<size_t>(f - g.flat_begin)] =
          current[static_cast<size_t>((g.row0 + f / g.cols) * whole.cols + g.col0 + f % g.cols)];
    }
    return static_cast<const float*>(scratch->data());
  };
  proto::CheckpointMetadata base;
  base.set_step(0);
  proto::ModelSpec* mo = base.mutable_model();
  mo->set_arch("gpt2");
  mo->set_vocab(model.vocab);
  mo->set_max_seq(model.max_seq);
  mo->set_layers(model.layers);
  mo->set_heads(model.heads);
  mo->set_hidden(model.hidden);
  proto::LayoutSpec* l = base.mutable_saved_layout();
  l->set_tp(1);
  l->set_cp(1);
  l->set_pp(1);
  l->set_vpp(1);
  l->set_dp(1);
  base.mutable_optimizer()->set_name("adamw");
  base.mutable_optimizer()->set_step_count(0);
  base.mutable_rng()->set_generator("imported from " + file + ": no training state");
  proto::Provenance* p = base.mutable_provenance();
  p->set_loom_version(kLoomVersion);
  p->set_saved_at(UtcTimestamp());
  std::error_code abs_ec;
  const fs::path abs = fs::absolute(file, abs_ec);
  p->set_source(Utf8OrMarked(abs_ec ? file : abs.string()));
  Status st = WriteRankFiles(tmp, 0, plan, source).status();
  if (st.ok()) st = CommitCheckpoint(out_root, tmp, 1, model, base);
  if (!st.ok()) {  // never leave a partial output behind (the root held no checkpoint)
    root.RemovePartial(0);
    return st;
  }
  out.dir = JoinPath(out_root, StepDirName(0));
  return out;
}

}  // namespace loom
