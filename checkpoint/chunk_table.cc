// Chunk entries of pieces, image fragments, and their merge into one checkpoint's metadata.
#include "checkpoint/chunk_table.h"

#include <algorithm>
#include <map>

#include "checkpoint/format.h"
#include "checkpoint/save_engine.h"
#include "model/layout.h"

namespace loom {
namespace {

void FillRegion(const Region& r, int dims, proto::Chunk* c) {
  c->add_region_offsets(r.row0);
  c->add_region_sizes(r.rows);
  if (dims > 1) {
    c->add_region_offsets(r.col0);
    c->add_region_sizes(r.cols);
  }
  c->set_flat_begin(r.flat_begin);
  c->set_flat_end(r.flat_end);
}

}  // namespace

void AddPieceChunk(const RankShardPlan& plan, StateKind state, size_t k, const std::string& file,
                   uint64_t offset, std::vector<uint32_t> crcs, proto::CheckpointMetadata* fragment) {
  const Piece& p = plan.writes[k];
  const ParamInfo& info = plan.layout.params[static_cast<size_t>(p.param)];
  proto::TensorEntry* t = fragment->add_tensors();
  t->set_name(info.name);
  t->set_state(StateName(state));
  t->set_dtype("F32");
  for (int64_t d : info.global_shape) t->add_shape(d);
  proto::Chunk* c = t->add_chunks();
  c->set_file(file);
  c->set_offset(offset);
  c->set_length(static_cast<uint64_t>(p.region.size()) * 4);
  FillRegion(p.region, static_cast<int>(info.global_shape.size()), c);
  for (uint32_t crc : crcs) c->add_crc32c(crc);
}

proto::CheckpointMetadata ImageFragment(const RankShardPlan& plan, int rank, const char* image) {
  proto::CheckpointMetadata f;
  const std::string file = RankFileName(rank);
  uint64_t at = 0;
  for (int s = 0; s < kNumStates; ++s) {
    for (size_t k = 0; k < plan.writes.size(); ++k) {
      const uint64_t n = static_cast<uint64_t>(plan.writes[k].region.size()) * 4;
      AddPieceChunk(plan, static_cast<StateKind>(s), k, file, at, BlockCrcs(image + at, n), &f);
      at += n;
    }
  }
  proto::FileEntry* e = f.add_files();
  e->set_name(file);
  e->set_bytes(ImageBytes(plan));
  e->set_rank(rank);
  return f;
}

Result<proto::CheckpointMetadata> MergeFragments(const ModelConfig& model,
                                                 proto::CheckpointMetadata base,
                                                 std::vector<proto::CheckpointMetadata> fragments,
                                                 const std::string& where) {
  // Tensors in canonical order, states in order, chunks by position.
  std::map<std::pair<std::string, std::string>, proto::TensorEntry> merged;
  for (proto::CheckpointMetadata& frag : fragments) {
    for (const proto::FileEntry& f : frag.files()) *base.add_files() = f;
    for (proto::TensorEntry& t : *frag.mutable_tensors()) {
      proto::TensorEntry& m = merged[{t.name(), t.state()}];
      if (m.name().empty()) {
        m = t;
      } else {
        for (proto::Chunk& c : *t.mutable_chunks()) *m.add_chunks() = std::move(c);
      }
    }
  }
  const ParamLayout canonical = ModelLayout(model, 1);
  for (const ParamInfo& p : canonical.params) {
    for (int s = 0; s < kNumStates; ++s) {
      auto it = merged.find({p.name, StateName(static_cast<StateKind>(s))});
      if (it == merged.end()) {
        return Internal(where + ": no rank wrote tensor '" + p.name + "' state '" +
                        StateName(static_cast<StateKind>(s)) + "'");
      }
      proto::TensorEntry& t = it->second;
      std::stable_sort(t.mutable_chunks()->begin(), t.mutable_chunks()->end(),
                       [](const proto::Chunk& a, const proto::Chunk& b) {
                         for (int d = 0; d < a.region_offsets_size(); ++d) {
                           if (a.region_offsets(d) != b.region_offsets(d)) {
                             return a.region_offsets(d) < b.region_offsets(d);
                           }
                         }
                         return a.flat_begin() < b.flat_begin();
                       });
      *base.add_tensors() = std::move(t);
    }
  }
  base.set_format_version(kCheckpointFormatVersion);
  base.set_checksum_block_bytes(kChecksumBlockBytes);
  return base;
}

}  // namespace loom
