// GPT-2 style model hyper-parameters and the canonical list of its parameters.
//
// Canonical parameter names (global layer numbers, never stage-local), in storage order:
//   wte [vocab, C]        token embedding, tied with the output projection
//   wpe [max_seq, C]      learned positions
//   h.{l}.ln_1.weight/bias [C]             h.{l}.attn.c_attn.weight [3C, C], .bias [3C]
//   h.{l}.attn.c_proj.weight [C, C], .bias  h.{l}.ln_2.weight/bias [C]
//   h.{l}.mlp.c_fc.weight [4C, C], .bias [4C]   h.{l}.mlp.c_proj.weight [C, 4C], .bias [C]
//   ln_f.weight/bias [C]
// Linear weights use nn.Linear's [out, in] layout. c_attn's output columns are q | k | v.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "parallel/layout.h"

namespace loom {

struct ModelConfig {
  int64_t vocab = 256;
  int64_t max_seq = 256;
  int64_t layers = 4;
  int64_t heads = 8;
  int64_t hidden = 256;

  int64_t ffn() const { return 4 * hidden; }
  int64_t head_dim() const { return hidden / heads; }
  // hidden % heads, positive sizes.
  Status Validate() const;
};

// How a tensor-parallel rank's piece of a parameter relates to the whole (Megatron style):
//   kReplicated  every TP rank holds the whole tensor (norms, wpe, row-parallel biases)
//   kRows        dim 0 is split: column-parallel weights and biases, the vocab-parallel wte.
//                With `parts` = 3 (c_attn) each of q, k, v is split separately, so a rank holds
//                q|k|v of its own heads.
//   kCols        dim 1 is split: row-parallel weights (attn.c_proj, mlp.c_proj)
enum class ShardKind { kReplicated, kRows, kCols };

struct ParamInfo {
  std::string name;
  Shape shape;         // local shape on this TP rank
  Shape global_shape;  // shape in a single-process model (wte: the true, unpadded vocab)
  ShardKind shard = ShardKind::kReplicated;
  int parts = 1;       // kRows: independent row blocks split separately (3 for c_attn)
  int64_t offset = 0;  // elements from the start of the local flat parameter buffer
  int layer = -1;      // -1 for embeddings and the final norm
  int bucket = 0;      // gradient/ZeRO bucket (per chunk: embeddings, each layer, final norm)
  int64_t bucket_offset = 0;  // elements from the start of its bucket
  bool decay = false;  // AdamW weight decay applies (matrices and embeddings, not biases/norms)
  float init_std = 0;  // > 0: normal(0, init_std); otherwise constant init_value
  float init_value = 0;
  int64_t numel() const { return NumElements(shape); }
  // Global flat index of local element i on TP rank `tp_rank` of `tp`, or -1 for vocabulary
  // padding rows (which do not exist in the single-process model).
  int64_t GlobalIndex(int64_t i, int tp_rank, int tp) const;
};

// A run of consecutive layers held together (a pipeline chunk), with the embedding (wte, wpe)
// if it is the first chunk of the model and the final norm if it is the last. The LM head of the
// last chunk uses the first chunk's wte (tied); a chunk that has the head but not the embedding
// gets wte from outside (see Gpt::SetTiedEmbedding) and does not own it.
struct ChunkSpec {
  int first_layer = 0;
  int num_layers = 0;
  bool embedding = true;
  bool head = true;
};

// The parameters of one rank (its tensor-parallel shard of its pipeline chunks) in storage order;
// a pure function of the config, the TP size and the chunks (default: the whole model). Buckets
// are contiguous ranges of the flat buffer: per chunk, embeddings, one per layer, final norm.
struct ParamLayout {
  std::vector<ParamInfo> params;
  int64_t total = 0;
  int tp = 1;
  int64_t padded_vocab = 0;  // vocab rounded up to a multiple of tp
  // [begin, end) element offsets of each bucket (embeddings, each layer, final norm).
  std::vector<std::pair<int64_t, int64_t>> buckets;

  static ParamLayout ForModel(const ModelConfig& config, int tp = 1);
  static ParamLayout ForChunks(const ModelConfig& config, int tp,
                               const std::vector<ChunkSpec>& chunks);
  // Index into `params` by name, or -1.
  int IndexOf(const std::string& name) const;
  const ParamInfo* Find(const std::string& name) const;
  int num_buckets() const { return static_cast<int>(buckets.size()); }
};

// The pipeline chunks held by world rank `rank` under `layout`: local chunk k of pipeline rank r
// is global chunk k*pp + r, each of layers / (pp*vpp) layers; the first global chunk has the
// embedding, the last the final norm and head.
std::vector<ChunkSpec> RankChunks(const ModelConfig& config, const Layout& layout, int rank);

// Fills `data` (layout.total floats, TP rank `tp_rank`) with the GPT-2 initialisation: normal(0,
// 0.02) for matrices and embeddings, 0.02/sqrt(2*layers) for residual projections (attn.c_proj,
// mlp.c_proj), zero biases, unit LayerNorm weights, zero vocabulary padding. Element g of tensor
// `name` in the single-process model depends only on (seed, name, g), so every TP shard equals the
// same slice of a single-process initialisation.
void InitParams(const ParamLayout& layout, uint64_t seed, float* data, int tp_rank = 0);

// Copies a rank's local parameters into their places in a single-process (tp = 1, one chunk)
// flat buffer `full` of `full_layout`, matching tensors by name (padding rows are dropped). Used
// to gather and compare layouts.
void ScatterToFull(const ParamLayout& local, const float* data, int tp_rank,
                   const ParamLayout& full_layout, float* full);

}  // namespace loom
