// Parallel layout: how `world` ranks are split into tensor (tp), context (cp), data (dp) and
// pipeline (pp) parallel groups, plus virtual pipeline stages (vpp), the ZeRO stage and sequence
// parallelism. A Layout is a value; every group is derived from it, never stored.
//
// Rank order is Megatron's: tp varies fastest, then cp, then dp, then pp:
//   rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank))
// so a TP group is a run of consecutive ranks (inside one node) and pipeline stages are far apart.
//
// Worked example: 16 ranks, tp = 2, pp = 4, dp = 2 (cp = 1).
//   coordinates (tp, cp, dp, pp) of rank r:  r = tp + 2 * (dp + 2 * pp)
//   tensor-parallel groups   (8): [0,1] [2,3] [4,5] [6,7] [8,9] [10,11] [12,13] [14,15]
//   data-parallel groups     (8): [0,2] [1,3] [4,6] [5,7] [8,10] [9,11] [12,14] [13,15]
//   pipeline groups          (4): [0,4,8,12] [1,5,9,13] [2,6,10,14] [3,7,11,15]
//   context-parallel groups (16): [0] [1] ... [15]  (cp = 1: every rank alone)
//   data+context groups      (8): same as the data-parallel groups when cp = 1
//   embedding groups         (4): first and last stage of each pipeline: [0,12] [1,13] [2,14]
//   [3,15]
// Ranks 0-3 hold pipeline stage 0 (embedding), ranks 12-15 stage 3 (head and loss); ranks 0 and 1
// split each layer's heads; ranks 0 and 2 hold the same parameters and average their gradients.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace loom {

struct Coord {
  int tp = 0, cp = 0, dp = 0, pp = 0;
  bool operator==(const Coord&) const = default;
};

enum class GroupKind { kTensor, kContext, kData, kPipeline, kDataContext, kEmbedding };
const char* GroupKindName(GroupKind kind);

// Model and batch facts the layout must divide.
struct LayoutConstraints {
  int64_t heads = 0, layers = 0, vocab = 0, seq = 0, hidden = 0;
  int64_t global_batch = 0, micro_batch = 0;
  int64_t ffn = 0;       // MLP width (0: 4 * hidden)
  int64_t kv_heads = 0;  // key/value heads (0: no grouped-query constraint)
};

// ", or set parallel.first_stage_layers: 7 and last_stage_layers: 7 (8 on each of the 14 other
// chunks)" for 126 layers over 16 chunks: the lightest symmetric uneven split, or "" when there
// is none (fewer than 3 chunks, or no split puts 1..mid layers on both ends).
std::string UnevenHint(int64_t layers, int64_t chunks);

struct Layout {
  int tp = 1, cp = 1, pp = 1, vpp = 1, dp = 1;
  int zero = 0;     // ZeRO stage 0..3
  bool sp = false;  // Megatron sequence parallelism (needs tp > 1 to matter)
  // Uneven pipeline stages (Megatron's decoder_first/last_pipeline_num_layers): the layers of
  // the first and of the last pipeline chunk (global chunk 0 holds the embedding, the last one
  // the head), 0 meaning "as the others"; the remaining layers are split evenly over the other
  // chunks. Both 0: every chunk holds layers / (pp * vpp).
  int first_stage_layers = 0, last_stage_layers = 0;
  bool uneven() const { return first_stage_layers > 0 || last_stage_layers > 0; }
  // Layers of each global chunk (pp * vpp entries; global chunk k*pp + r is rank r's local
  // chunk k), or an error naming the rule `layers` breaks.
  Result<std::vector<int>> ChunkLayers(int64_t layers) const;

  int world() const { return tp * cp * dp * pp; }
  int RankOf(const Coord& c) const { return c.tp + tp * (c.cp + cp * (c.dp + dp * c.pp)); }
  Coord CoordOf(int rank) const;

  // Ranks of the group of `kind` that contains `rank`, in increasing order of the varying
  // coordinate (so the index in the list is that coordinate). Empty for kEmbedding on ranks that
  // are neither the first nor the last pipeline stage.
  std::vector<int> GroupOf(GroupKind kind, int rank) const;
  // Every group of `kind`, each listed once, ordered by its first rank.
  std::vector<std::vector<int>> AllGroups(GroupKind kind) const;

  // Vocabulary rounded up to a multiple of tp (padding rows are masked out of the softmax).
  int64_t PaddedVocab(int64_t vocab) const { return (vocab + tp - 1) / tp * tp; }

  // Checks the layout against itself and the model; the message names the violated constraint,
  // e.g. "model.heads (12) must be divisible by tp (8)". world = 0 skips the world check.
  Status Validate(int world, const LayoutConstraints& m) const;

  // "tp=2 cp=1 pp=4 vpp=1 dp=2 zero=1 sp=on", then first_stage_layers=N / last_stage_layers=N
  // when set.
  std::string ToString() const;
};

}  // namespace loom
