// The layout math of a model's parameters, whatever the model: each tensor's tensor-parallel
// split, its place in one rank's flat buffer and in its gradient/ZeRO bucket, its global index,
// seeded initialisation, pipeline chunks. A model family lists its tensors with
// ParamLayoutBuilder (model/layout.h: GPT-2); the parameter stores, the checkpoint code and the
// planner read the resulting ParamLayout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "parallel/layout.h"

namespace loom {

// How a tensor-parallel rank's piece of a parameter relates to the whole (Megatron style):
//   kReplicated  every TP rank holds the whole tensor (norms, wpe, row-parallel biases)
//   kRows        dim 0 is split: column-parallel weights and biases, a vocab-parallel embedding.
//                With `parts` = 3 (GPT-2's c_attn) each of q, k, v is split separately, so a rank
//                holds q|k|v of its own heads.
//   kCols        dim 1 is split: row-parallel weights (GPT-2's attn.c_proj, mlp.c_proj)
enum class ShardKind { kReplicated, kRows, kCols };

struct ParamInfo {
  std::string name;
  Shape shape;         // local shape on this TP rank
  Shape global_shape;  // shape in a single-process model (a vocabulary: the true, unpadded one)
  ShardKind shard = ShardKind::kReplicated;
  int parts = 1;       // kRows: independent row blocks split separately (3 for c_attn)
  int64_t offset = 0;  // elements from the start of the local flat parameter buffer
  int layer = -1;      // -1 for embeddings and the final norm
  int bucket = 0;      // gradient/ZeRO bucket (per chunk: embeddings, each layer, final norm)
  int64_t bucket_offset = 0;  // elements from the start of its bucket
  bool decay = false;  // AdamW weight decay applies (matrices and embeddings, not biases/norms)
  float init_std = 0;  // > 0: normal(0, init_std); otherwise constant init_value
  float init_value = 0;
  // kReplicated whose gradient each TP rank computes only in part (Llama's attn.kv when there are
  // fewer KV heads than tp): summed over the TP group before use, with or without SP.
  bool tp_partial_grad = false;
  int64_t numel() const { return NumElements(shape); }
  // Global flat index of local element i on TP rank `tp_rank` of `tp`, or -1 for vocabulary
  // padding rows (which do not exist in the single-process model).
  int64_t GlobalIndex(int64_t i, int tp_rank, int tp) const;
};

// A run of consecutive layers held together (a pipeline chunk), with the embedding if it is the
// first chunk of the model and the final norm (and head) if it is the last. With tied embeddings
// the LM head of the last chunk uses the first chunk's embedding; a chunk that has the head but
// not the embedding gets it from outside (see Gpt::SetTiedEmbedding) and does not own it.
struct ChunkSpec {
  int first_layer = 0;
  int num_layers = 0;
  bool embedding = true;
  bool head = true;
};

// The parameters of one rank (its tensor-parallel shard of its pipeline chunks) in storage order
// (model/layout.h builds it). Buckets are contiguous ranges of the flat buffer: per chunk,
// embeddings, one per layer, final norm.
struct ParamLayout {
  std::vector<ParamInfo> params;
  int64_t total = 0;
  int tp = 1;
  int64_t padded_vocab = 0;  // vocab rounded up to a multiple of tp
  // [begin, end) element offsets of each bucket (embeddings, each layer, final norm).
  std::vector<std::pair<int64_t, int64_t>> buckets;

  // Index into `params` by name, or -1.
  int IndexOf(const std::string& name) const;
  const ParamInfo* Find(const std::string& name) const;
  int num_buckets() const { return static_cast<int>(buckets.size()); }
};

// One tensor as a model family declares it (global shape; the builder derives the local one).
struct TensorSpec {
  std::string name;
  Shape global_shape;
  ShardKind shard = ShardKind::kReplicated;
  int parts = 1;
  int layer = -1;
  bool decay = false;
  float init_std = 0;
  float init_value = 0;
  bool pad_rows = false;         // kRows over a vocabulary: rows padded to a multiple of tp
  bool tp_partial_grad = false;  // ParamInfo::tp_partial_grad
};

// Builds one rank's ParamLayout: tensors are added in storage order and grouped into buckets.
class ParamLayoutBuilder {
 public:
  // `vocab`: the vocabulary that pad_rows tensors pad to a multiple of tp.
  ParamLayoutBuilder(int tp, int64_t vocab);
  void Add(TensorSpec t);
  void CloseBucket();  // the tensors added since the last close form the next bucket
  ParamLayout Finish();

 private:
  ParamLayout out_;
  int bucket_ = 0;
  int64_t bucket_begin_ = 0;
};

// The pipeline chunks held by world rank `rank` under `layout` for a model of `layers` layers:
// local chunk k of pipeline rank r is global chunk k*pp + r, of Layout::ChunkLayers layers each
// (layers / (pp*vpp) unless the first or last stage is set lighter);
// the first global chunk has the embedding, the last the final norm and head.
std::vector<ChunkSpec> RankChunks(int64_t layers, const Layout& layout, int rank);

// Fills `data` (layout.total floats, TP rank `tp_rank`) with each tensor's initialisation
// (normal(0, init_std), or init_value), zero in vocabulary padding. Element g of tensor `name` in
// the single-process model depends only on (seed, name, g), so every TP shard equals the same
// slice of a single-process initialisation.
void InitParams(const ParamLayout& layout, uint64_t seed, float* data, int tp_rank = 0);

// Copies a rank's local parameters into their places in a single-process (tp = 1, one chunk)
// flat buffer `full` of `full_layout`, matching tensors by name (padding rows are dropped). Used
// to gather and compare layouts.
void ScatterToFull(const ParamLayout& local, const float* data, int tp_rank,
                   const ParamLayout& full_layout, float* full);

}  // namespace loom
