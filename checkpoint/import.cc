// Streaming import of GPT-2 weights from safetensors into a step-0 checkpoint.
#include "checkpoint/import.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "checkpoint/export.h"
#include "checkpoint/format.h"
#include "checkpoint/metadata_specs.h"
#include "checkpoint/shard_plan.h"
#include "checkpoint/writer.h"
#include "core/file_util.h"
#include "core/interrupt.h"
#include "core/safetensors.h"
#include "core/version.h"
#include "model/layout.h"
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

// Where the weights are and who says how many heads they have.
struct ImportInput {
  std::string file;        // the safetensors file
  std::string config;      // a Hugging Face directory's config.json ("": none)
  int64_t heads = 0;       // given or from config.json (0: the file's metadata must say)
  std::string heads_from;  // where `heads` came from, for a contradiction with the file
};

// n_head of a Hugging Face config.json (0: absent).
Result<int64_t> ConfigHeads(const std::string& config) {
  LOOM_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(config, 1 << 20));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument(config + ": not a JSON object");
  if (!j.contains("n_head")) return int64_t{0};
  const nlohmann::json& n = j["n_head"];
  if (!n.is_number_integer() || n.get<int64_t>() <= 0) {
    return InvalidArgument(config + ": field 'n_head': expected a positive integer, got " +
                           n.dump());
  }
  return n.get<int64_t>();
}

// A Hugging Face model directory (as the hub ships GPT-2, or as `export --hf-dir` writes it):
// its model.safetensors, and the heads from its config.json when the file does not say.
Result<ImportInput> ResolveInput(const std::string& input, int64_t heads,
                                 const std::string& heads_name) {
  ImportInput in{input, "", heads, ""};
  int64_t config_heads = 0;
  std::error_code ec;
  if (fs::is_directory(input, ec)) {
    in.file = JoinPath(input, "model.safetensors");
    if (!fs::is_regular_file(in.file, ec)) {
      return InvalidArgument(input + ": a directory without model.safetensors: expected a " +
                             "safetensors file or a Hugging Face model directory holding one " +
                             "(sharded model-*-of-*.safetensors are not supported)");
    }
    in.config = JoinPath(input, "config.json");
    if (fs::exists(in.config, ec)) {
      LOOM_ASSIGN_OR_RETURN(config_heads, ConfigHeads(in.config));
    }
  }
  if (heads != 0 && config_heads != 0 && heads != config_heads) {
    return InvalidArgument(in.config + ": " + heads_name + " " + std::to_string(heads) +
                           " contradicts field 'n_head' " + std::to_string(config_heads));
  }
  in.heads_from = heads != 0 ? heads_name + " " + std::to_string(heads)
                             : in.config + ": field 'n_head' " + std::to_string(config_heads);
  if (heads == 0) in.heads = config_heads;
  return in;
}

// How the file names GPT-2's tensors: Hugging Face's names (optionally under `transformer.`) or
// Loom's (metadata naming=loom, or `wte` without `.weight`).
struct FileNaming {
  bool loom = false;
  std::string prefix;
  explicit FileNaming(const TensorReader& ix) {
    const auto& entries = ix.tensors();
    auto it = ix.metadata().find("naming");
    loom = (it != ix.metadata().end() && it->second == "loom") ||
           (entries.count("wte") && !entries.count("wte.weight"));
    prefix = !loom && entries.count("transformer.wte.weight") ? "transformer." : "";
  }
  const SafetensorsEntry* Find(const TensorReader& ix, const std::string& name) const {
    auto it = ix.tensors().find(prefix + name);
    return it == ix.tensors().end() ? nullptr : &it->second;
  }
  std::string Wte() const { return loom ? "wte" : "wte.weight"; }
  std::string Wpe() const { return loom ? "wpe" : "wpe.weight"; }
};

// vocab, hidden and max_seq from wte and wpe, layers from the h.<l>. names.
Result<ModelConfig> ModelShape(const TensorReader& ix, const FileNaming& n,
                               const std::string& file) {
  const SafetensorsEntry* wte = n.Find(ix, n.Wte());
  const SafetensorsEntry* wpe = n.Find(ix, n.Wpe());
  if (wte == nullptr || wpe == nullptr || wte->shape.size() != 2 || wpe->shape.size() != 2) {
    return InvalidArgument(file + ": expected GPT-2 weights: tensors '" + n.prefix +
                           (n.loom ? "wte' and 'wpe'" : "wte.weight' and 'wpe.weight'") +
                           " of two dimensions");
  }
  ModelConfig model;
  model.vocab = wte->shape[0];
  model.hidden = wte->shape[1];
  model.max_seq = wpe->shape[0];
  std::set<int64_t> layer_ids;
  for (const auto& [name, e] : ix.tensors()) {
    long long l = -1;
    if (name.rfind(n.prefix + "h.", 0) == 0 &&
        std::sscanf(name.c_str() + n.prefix.size(), "h.%lld.", &l) == 1) {
      layer_ids.insert(l);
    }
  }
  model.layers = static_cast<int64_t>(layer_ids.size());
  if (model.vocab <= 0 || model.hidden <= 0 || model.max_seq <= 0) {
    return InvalidArgument(file + ": tensors '" + n.prefix + n.Wte() + "' " +
                           ShapeToString(wte->shape) + " and '" + n.prefix + n.Wpe() + "' " +
                           ShapeToString(wpe->shape) +
                           ": expected [vocab, hidden] and [max_seq, hidden], all above zero");
  }
  return model;
}

// The head count: the file's metadata n_head (which must agree with one given), else the given.
Result<int64_t> Heads(const TensorReader& ix, const ImportInput& in) {
  const auto n_head = ix.metadata().find("n_head");
  if (n_head == ix.metadata().end()) {
    if (in.heads != 0) return in.heads;
    return InvalidArgument(in.file +
                           ": the number of attention heads is not in the file's "
                           "metadata (n_head): give it with --heads");
  }
  const std::string& v = n_head->second;
  char* end = nullptr;
  const long long in_file = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || in_file <= 0) {
    return InvalidArgument(
        in.file + ": metadata field 'n_head': expected a positive integer, got '" + v + "'");
  }
  if (in.heads != 0 && in.heads != in_file) {
    return InvalidArgument(in.file + ": " + in.heads_from +
                           " contradicts the file's metadata n_head " + v);
  }
  return static_cast<int64_t>(in_file);
}

// The model the file holds: its shape and head count, checked.
Result<ModelConfig> ImportedModel(const TensorReader& ix, const FileNaming& n,
                                  const ImportInput& in) {
  LOOM_ASSIGN_OR_RETURN(ModelConfig model, ModelShape(ix, n, in.file));
  LOOM_ASSIGN_OR_RETURN(model.heads, Heads(ix, in));
  if (model.layers == 0 || model.heads <= 0 || model.hidden % model.heads != 0) {
    return InvalidArgument(in.file + ": a GPT-2 of " + std::to_string(model.layers) +
                           " layers, hidden " + std::to_string(model.hidden) + " and " +
                           std::to_string(model.heads) + " heads: expected at least one layer " +
                           "and a hidden size divisible by the heads");
  }
  return model;
}

// Canonical name -> (the file's name, stored transposed).
using NameMap = std::map<std::string, std::pair<std::string, bool>>;

// Every tensor of `model`, by the file's name and layout, with its shape checked.
Result<NameMap> MapTensors(const TensorReader& ix, const FileNaming& n, const ModelConfig& model,
                           const std::string& file) {
  NameMap names;
  for (const ParamInfo& p : ModelLayout(model, 1).params) {
    bool transposed = false;
    const std::string name = n.loom ? p.name : HuggingFaceGpt2Name(p.name, &transposed);
    const SafetensorsEntry* e = n.Find(ix, name);
    std::vector<int64_t> want(p.global_shape.begin(), p.global_shape.end());
    if (transposed) std::swap(want[0], want[1]);
    if (e == nullptr) {
      return DataLoss(file + ": tensor '" + n.prefix + name + "' " + ShapeToString(want) +
                      " is missing (a GPT-2 of " + std::to_string(model.layers) + " layers)");
    }
    if (e->shape != want) {
      return DataLoss(file + ": tensor '" + n.prefix + name + "': field 'shape' is " +
                      ShapeToString(e->shape) + ", expected " + ShapeToString(want));
    }
    names[p.name] = {n.prefix + name, transposed};
  }
  return names;
}

// A Hugging Face lm_head.weight: the head is tied, so it must be wte itself.
Status CheckTiedHead(const TensorReader& ix, const FileNaming& n, const SafetensorsEntry& head,
                     const std::string& file) {
  std::vector<float> a, b;
  LOOM_RETURN_IF_ERROR(ix.Read("lm_head.weight", &a));
  LOOM_RETURN_IF_ERROR(ix.Read(n.prefix + "wte.weight", &b));
  const bool same = head.shape == n.Find(ix, n.Wte())->shape && a.size() == b.size() &&
                    std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  if (!same) {
    return InvalidArgument(file + ": tensor 'lm_head.weight' differs from '" + n.prefix +
                           "wte.weight': Loom's GPT-2 ties the head to the embedding");
  }
  return Status::Ok();
}

// The file's tensors that are not the model's: attention-mask buffers and a tied head are
// skipped (counted in *skipped); anything else is refused.
Status CheckOthers(const TensorReader& ix, const FileNaming& n, const NameMap& names,
                   const ModelConfig& model, const std::string& file, int* skipped) {
  std::set<std::string> used;
  for (const auto& [canonical, named] : names) used.insert(named.first);
  for (const auto& [name, e] : ix.tensors()) {
    if (used.count(name)) continue;
    long long l = -1;
    char tail[32] = {};
    const bool buffer =
        !n.loom && std::sscanf(name.c_str() + n.prefix.size(), "h.%lld.attn.%31s", &l, tail) == 2 &&
        (std::strcmp(tail, "bias") == 0 || std::strcmp(tail, "masked_bias") == 0);
    if (!buffer && !(name == "lm_head.weight" && !n.loom)) {
      return InvalidArgument(file + ": tensor '" + name + "' is not part of a GPT-2 of " +
                             std::to_string(model.layers) + " layers (" +
                             (n.loom ? "Loom" : "Hugging Face") + " names)");
    }
    if (!buffer) LOOM_RETURN_IF_ERROR(CheckTiedHead(ix, n, e, file));
    ++*skipped;
  }
  return Status::Ok();
}

// The pieces of the one-rank plan, tensor by tensor as the file holds them: the weights as fp32
// masters (finite, [out, in]), the AdamW moments zero.
class ImportSource {
 public:
  ImportSource(const TensorReader& ix, const NameMap& names, const RankShardPlan& plan,
               const std::string& file)
      : ix_(ix), names_(names), plan_(plan), file_(file) {}
  int tensors() const { return tensors_; }

  Result<const float*> operator()(StateKind s, size_t k, std::vector<float>* scratch) {
    const Piece& p = plan_.writes[k];
    if (s != StateKind::kParam) {  // AdamW starts from zero moments
      scratch->assign(static_cast<size_t>(p.region.size()), 0.0f);
      return static_cast<const float*>(scratch->data());
    }
    const ParamInfo& info = plan_.layout.params[static_cast<size_t>(p.param)];
    if (loaded_ != info.name) LOOM_RETURN_IF_ERROR(Load(info));
    return PieceOf(WholeRegion(info), p.region, scratch);
  }

 private:
  // Reads tensor `info` into current_ as [out, in], refusing what is not finite.
  Status Load(const ParamInfo& info) {
    LOOM_RETURN_IF_ERROR(CheckInterrupted("the imported checkpoint"));
    const auto& [name, transposed] = names_.at(info.name);
    LOOM_RETURN_IF_ERROR(ix_.Read(name, transposed ? &raw_ : &current_));
    const std::vector<float>& got = transposed ? raw_ : current_;
    for (size_t i = 0; i < got.size(); ++i) {
      if (!std::isfinite(got[i])) {
        return DataLoss(file_ + ": tensor '" + name + "' element " + std::to_string(i) + " is " +
                        (std::isnan(got[i]) ? "NaN" : "infinite") +
                        ": expected finite weights to train from");
      }
    }
    if (transposed) {  // [in, out] -> [out, in]
      const Region whole = WholeRegion(info);
      current_.resize(raw_.size());
      for (int64_t i = 0; i < whole.rows; ++i) {
        for (int64_t j = 0; j < whole.cols; ++j)
          current_[i * whole.cols + j] = raw_[j * whole.rows + i];
      }
    }
    loaded_ = info.name;
    ++tensors_;
    return Status::Ok();
  }

  // The piece's box of the [out, in] matrix (the fused QKV weight is written in blocks), and a
  // flat range inside it.
  Result<const float*> PieceOf(const Region& whole, const Region& g, std::vector<float>* scratch) {
    if (g.col0 == 0 && g.cols == whole.cols) {
      return static_cast<const float*>(current_.data()) + g.row0 * whole.cols + g.flat_begin;
    }
    scratch->resize(static_cast<size_t>(g.size()));
    for (int64_t f = g.flat_begin; f < g.flat_end; ++f) {
      (*scratch)[static_cast<size_t>(f - g.flat_begin)] =
          current_[static_cast<size_t>((g.row0 + f / g.cols) * whole.cols + g.col0 + f % g.cols)];
    }
    return static_cast<const float*>(scratch->data());
  }

  const TensorReader& ix_;
  const NameMap& names_;
  const RankShardPlan& plan_;
  const std::string& file_;
  std::string loaded_;  // the tensor in current_, canonical name
  std::vector<float> current_, raw_;
  int tensors_ = 0;
};

// Everything but the tensors: step 0 of a one-rank layout, no training state.
proto::CheckpointMetadata ImportMetadata(const ModelConfig& model, const std::string& file) {
  proto::CheckpointMetadata base;
  base.set_step(0);
  SetModelSpec(model, base.mutable_model());
  SetLayoutSpec(Layout{}, base.mutable_saved_layout());
  base.mutable_optimizer()->set_name("adamw");
  base.mutable_optimizer()->set_step_count(0);
  base.mutable_rng()->set_generator("imported from " + file + ": no training state");
  proto::Provenance* p = base.mutable_provenance();
  p->set_loom_version(kLoomVersion);
  p->set_saved_at(UtcTimestamp());
  std::error_code abs_ec;
  const fs::path abs = fs::absolute(file, abs_ec);
  p->set_source(Utf8OrMarked(abs_ec ? file : abs.string()));
  return base;
}

}  // namespace

bool HoldsWeights(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return fs::path(path).extension() == ".safetensors";
  return fs::is_regular_file(JoinPath(path, "model.safetensors"), ec) &&
         ListCheckpoints(path).empty();
}

Result<ImportResult> ImportSafetensors(const std::string& input, const std::string& out_root,
                                       int64_t heads, const std::string& heads_name) {
  LOOM_ASSIGN_OR_RETURN(const ImportInput in, ResolveInput(input, heads, heads_name));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<TensorReader> reader, TensorReader::Open(in.file));
  const FileNaming naming(*reader);
  ImportResult out;
  LOOM_ASSIGN_OR_RETURN(out.model, ImportedModel(*reader, naming, in));
  LOOM_ASSIGN_OR_RETURN(const NameMap names, MapTensors(*reader, naming, out.model, in.file));
  LOOM_RETURN_IF_ERROR(CheckOthers(*reader, naming, names, out.model, in.file, &out.skipped));

  LOOM_ASSIGN_OR_RETURN(const OutputRoot root, OutputRoot::Open(out_root, ""));
  const RankShardPlan plan = PlanRank(out.model, Layout{}, 0);  // one rank
  const proto::CheckpointMetadata base = ImportMetadata(out.model, in.file);
  const std::string tmp = TempStepDir(out_root, 0);
  ImportSource source(*reader, names, plan, in.file);
  Status st = WriteRankFiles(tmp, 0, plan, std::ref(source)).status();
  if (st.ok()) st = CommitCheckpoint(out_root, tmp, 1, out.model, base);
  if (!st.ok()) {  // never leave a partial output behind (the root held no checkpoint)
    root.RemovePartial(0);
    return st;
  }
  out.tensors = source.tensors();
  out.dir = JoinPath(out_root, StepDirName(0));
  return out;
}

}  // namespace loom
