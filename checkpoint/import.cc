// Streaming import of GPT-2 or Llama weights from safetensors into a step-0 checkpoint.
#include "checkpoint/import.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "checkpoint/format.h"
#include "checkpoint/hf_shards.h"
#include "checkpoint/import_plan.h"
#include "checkpoint/metadata_specs.h"
#include "checkpoint/shard_plan.h"
#include "checkpoint/writer.h"
#include "core/file_util.h"
#include "core/interrupt.h"
#include "core/version.h"
#include "model/layout.h"
#include "parallel/layout.h"

namespace loom {

namespace fs = std::filesystem;

Status CheckTiedHead(const WeightFiles& ix, const std::string& head, const std::string& embedding,
                     const std::string& why) {
  std::vector<float> a, b;
  LOOM_RETURN_IF_ERROR(ix.Read(head, &a));
  LOOM_RETURN_IF_ERROR(ix.Read(embedding, &b));
  const bool same = ix.tensors().at(head).shape == ix.tensors().at(embedding).shape &&
                    a.size() == b.size() &&
                    std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  if (!same) {
    return InvalidArgument(ix.FileOf(head) + ": tensor '" + head + "' differs from '" + embedding +
                           "': " + why);
  }
  return Status::Ok();
}

namespace {

// A Hugging Face model directory (as the hub ships a model, or as `export --hf-dir` writes it):
// its model.safetensors, else its sharded set's index, and its config.json; or a file, and the
// config.json beside it.
Result<ImportInput> LocateWeights(const std::string& input) {
  ImportInput in;
  std::error_code ec;
  in.directory = fs::is_directory(input, ec);
  fs::path config = fs::path(input).parent_path() / "config.json";
  in.weights = input;
  if (in.directory) {
    const std::string single = JoinPath(input, kHfSingleFile);
    const std::string index = JoinPath(input, kHfIndexFile);
    if (fs::is_regular_file(single, ec)) {
      in.weights = single;
    } else if (fs::is_regular_file(index, ec)) {
      in.weights = index;
    } else {
      return InvalidArgument(input + ": a directory without " + kHfSingleFile + " or " +
                             kHfIndexFile + ": expected a safetensors file or a Hugging Face " +
                             "model directory holding one (or an index of its shards)");
    }
    config = fs::path(input) / "config.json";
  }
  if (fs::exists(config, ec)) in.config = config.string();
  return in;
}

// The pieces of the one-rank plan, tensor by tensor as the file holds them: the weights as fp32
// masters (finite, [out, in]), the AdamW moments zero.
class ImportSource {
 public:
  ImportSource(const WeightFiles& ix, const ImportPlan& names, const RankShardPlan& plan)
      : ix_(ix), names_(names), plan_(plan) {}
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
  // Reads tensor `info` into current_ as [out, in] (its parts one after another), refusing what
  // is not finite.
  Status Load(const ParamInfo& info) {
    LOOM_RETURN_IF_ERROR(CheckInterrupted("the imported checkpoint"));
    const std::vector<ImportPart>& parts = names_.parts.at(info.name);
    current_.clear();
    for (const ImportPart& part : parts) {
      // One part in its layout is read in place; others go through raw_.
      const bool direct = parts.size() == 1 && !part.transposed;
      std::vector<float>& got = direct ? current_ : raw_;
      LOOM_RETURN_IF_ERROR(ix_.Read(part.name, &got));
      for (size_t i = 0; i < got.size(); ++i) {
        if (!std::isfinite(got[i])) {
          return DataLoss(ix_.FileOf(part.name) + ": tensor '" + part.name + "' element " +
                          std::to_string(i) + " is " + (std::isnan(got[i]) ? "NaN" : "infinite") +
                          ": expected finite weights to train from");
        }
      }
      if (part.transposed) {  // [in, out] -> [out, in]
        const Region whole = WholeRegion(info);
        current_.resize(raw_.size());
        for (int64_t i = 0; i < whole.rows; ++i) {
          for (int64_t j = 0; j < whole.cols; ++j)
            current_[i * whole.cols + j] = raw_[j * whole.rows + i];
        }
      } else if (!direct) {
        current_.insert(current_.end(), raw_.begin(), raw_.end());
      }
      ++tensors_;
    }
    if (current_.size() != static_cast<size_t>(info.numel())) {  // the plan checked the shapes
      return Internal("import of '" + info.name + "': " + std::to_string(current_.size()) +
                      " elements read, expected " + std::to_string(info.numel()));
    }
    loaded_ = info.name;
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

  const WeightFiles& ix_;
  const ImportPlan& names_;
  const RankShardPlan& plan_;
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
  if (fs::is_regular_file(path, ec)) {
    return fs::path(path).extension() == ".safetensors" ||
           fs::path(path).filename() == kHfIndexFile;
  }
  return (fs::is_regular_file(JoinPath(path, kHfSingleFile), ec) ||
          fs::is_regular_file(JoinPath(path, kHfIndexFile), ec)) &&
         ListCheckpoints(path).empty();
}

Result<ImportResult> ImportSafetensors(const std::string& input, const std::string& out_root,
                                       int64_t heads, const std::string& heads_name) {
  LOOM_ASSIGN_OR_RETURN(const ImportInput in, LocateWeights(input));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<WeightFiles> files, WeightFiles::Open(in.weights));
  LOOM_ASSIGN_OR_RETURN(const ImportPlan names,
                        HoldsLlama(*files, in) ? PlanLlamaImport(*files, in, heads, heads_name)
                                               : PlanGpt2Import(*files, in, heads, heads_name));
  ImportResult out;
  out.model = names.model;
  out.skipped = names.skipped;

  LOOM_ASSIGN_OR_RETURN(const OutputRoot root, OutputRoot::Open(out_root, ""));
  const RankShardPlan plan = PlanRank(out.model, Layout{}, 0);  // one rank
  const proto::CheckpointMetadata base = ImportMetadata(out.model, files->path());
  const std::string tmp = TempStepDir(out_root, 0);
  ImportSource source(*files, names, plan);
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
