// A checkpoint's states read into one rank's state.
#include "checkpoint/load_state.h"
#include "checkpoint/metadata_specs.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "checkpoint/shard_plan.h"
#include "model/layout.h"

namespace loom {

Status CheckSameModel(const CheckpointReader& reader, const std::string& path,
                      const ModelConfig& model, int states) {
  const proto::ModelSpec& mo = reader.meta().model();
  const std::pair<const char*, std::pair<int64_t, int64_t>> fields[] = {
      {"vocab", {mo.vocab(), model.vocab}},    {"max_seq", {mo.max_seq(), model.max_seq}},
      {"layers", {mo.layers(), model.layers}}, {"heads", {mo.heads(), model.heads}},
      {"hidden", {mo.hidden(), model.hidden}},
  };
  for (const auto& [name, v] : fields) {
    if (v.first != v.second) {
      return DataLoss(path + ": field 'model." + name + "': the checkpoint has " +
                      std::to_string(v.first) + ", the job's model has " +
                      std::to_string(v.second) + " (a checkpoint of another model)");
    }
  }
  const ModelConfig saved = ModelOf(mo);
  if (saved.family != model.family || saved.kv() != model.kv() || saved.ffn() != model.ffn() ||
      saved.tie_embeddings != model.tie_embeddings) {
    return DataLoss(
        path + ": field 'model': the checkpoint holds a " + ModelFamilyName(saved.family) +
        " model (kv_heads " + std::to_string(saved.kv()) + ", ffn_hidden " +
        std::to_string(saved.ffn()) + (saved.tie_embeddings ? ", tied" : ", untied") +
        "), the job's is a " + ModelFamilyName(model.family) + " model (kv_heads " +
        std::to_string(model.kv()) + ", ffn_hidden " + std::to_string(model.ffn()) +
        (model.tie_embeddings ? ", tied" : ", untied") + ") (a checkpoint of another model)");
  }
  for (const ParamInfo& p : ModelLayout(model, 1).params) {
    for (int s = 0; s < states; ++s) {
      const proto::TensorEntry* t = reader.Find(p.name, static_cast<StateKind>(s));
      if (t == nullptr) continue;  // reported, with its chunks, by the reads
      const std::vector<int64_t> shape(t->shape().begin(), t->shape().end());
      if (shape != std::vector<int64_t>(p.global_shape.begin(), p.global_shape.end())) {
        return DataLoss(path + ": tensor '" + p.name + "' state '" + t->state() +
                        "': field 'shape' does not match the job's model");
      }
    }
  }
  return Status::Ok();
}

namespace {

// Calls fn(name, state, region, dst) for every piece of every state the rank holds, as the
// state's elements map onto the global tensors.
template <typename Fn>
Status ForEachHeldPiece(const ParamLayout& params, int tp_rank, int states, RankState* state,
                        Fn fn) {
  std::vector<Piece> pieces;
  for (int s = 0; s < states; ++s) {
    const StateKind kind = static_cast<StateKind>(s);
    for (int b = 0; b < params.num_buckets(); ++b) {
      int64_t lo = 0, hi = 0;
      float* base = state->StateData(kind, b, &lo, &hi);
      const int64_t first = params.buckets[b].first, size = params.buckets[b].second - first;
      pieces.clear();
      MapBucketRange(params, b, tp_rank, lo, std::min(hi, size), false, &pieces);
      for (const Piece& p : pieces) {
        const std::string& name = params.params[static_cast<size_t>(p.param)].name;
        LOOM_RETURN_IF_ERROR(fn(name, kind, p.region, base + (p.local - first - lo)));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status ReadRankState(CheckpointReader* reader, const ParamLayout& params, int tp_rank, int states,
                     RankState* state) {
  LOOM_RETURN_IF_ERROR(state->Quiesce());
  return ForEachHeldPiece(params, tp_rank, states, state,
                          [&](const std::string& name, StateKind kind, const Region& region,
                              float* dst) { return reader->Read(name, kind, region, dst); });
}

Status PlanRankStateReads(CheckpointReader* reader, const ParamLayout& params, int tp_rank,
                          int states, RankState* state, std::vector<FileRange>* out) {
  return ForEachHeldPiece(
      params, tp_rank, states, state,
      [&](const std::string& name, StateKind kind, const Region& region, float*) {
        reader->PlanReads(name, kind, region, out);
        return Status::Ok();
      });
}

}  // namespace loom
