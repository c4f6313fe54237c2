// Checkpoints held in memory (the in-memory snapshots' images): every rank's image, laid out as
// the save engine copies it, indexed by ImageFragment, merged, and read through the checkpoint
// reader from a byte source — the same chunk table as the file writer's, the same values in any
// other layout, a damaged byte refused with the chunk named.
#include "checkpoint/chunk_table.h"

#include <gtest/gtest.h>

#include <map>

#include "checkpoint/format.h"
#include "checkpoint/metadata_specs.h"
#include "checkpoint/reader.h"
#include "checkpoint/save_engine.h"
#include "checkpoint/writer.h"
#include "core/rng.h"
#include "model/layout.h"
#include "tests/checkpoint/layout_helpers.h"
#include "tests/checkpoint/temp_dir_test.h"

namespace loom {
namespace {

const ModelConfig kModel{/*vocab=*/257, /*max_seq=*/16, /*layers=*/4, /*heads=*/4, /*hidden=*/8};

float Value(const std::string& name, StateKind s, int64_t global_index) {
  return static_cast<float>(HashString(name.c_str()) % 89) * 10000.0f +
         static_cast<float>(s) * 1000.0f + static_cast<float>(global_index % 997);
}

// The values of plan.writes[k] for `state`, in its order.
std::vector<float> PieceValues(const RankShardPlan& plan, StateKind state, size_t k) {
  const Piece& p = plan.writes[k];
  const ParamInfo& info = plan.layout.params[static_cast<size_t>(p.param)];
  int64_t rows, cols;
  GlobalMatrix(info, &rows, &cols);
  std::vector<float> out;
  const Region& g = p.region;
  for (int64_t i = g.flat_begin; i < g.flat_end; ++i) {
    out.push_back(Value(info.name, state, (g.row0 + i / g.cols) * cols + g.col0 + i % g.cols));
  }
  return out;
}

// Every rank's image of `lay`: for each state, each piece, as the save engine lays it out.
std::map<std::string, std::vector<char>> Images(const Layout& lay) {
  std::map<std::string, std::vector<char>> images;
  for (int r = 0; r < lay.world(); ++r) {
    const RankShardPlan plan = PlanRank(kModel, lay, r);
    std::vector<char>& img = images[RankFileName(r)];
    for (int s = 0; s < kNumStates; ++s) {
      for (size_t k = 0; k < plan.writes.size(); ++k) {
        const std::vector<float> v = PieceValues(plan, static_cast<StateKind>(s), k);
        const char* b = reinterpret_cast<const char*>(v.data());
        img.insert(img.end(), b, b + v.size() * 4);
      }
    }
    EXPECT_EQ(img.size(), ImageBytes(plan));
  }
  return images;
}

class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::map<std::string, std::vector<char>>* images) : images_(images) {}
  Status Read(const std::string& file, uint64_t offset, uint64_t n, char* dst) override {
    ++reads;
    auto it = images_->find(file);
    if (it == images_->end() || offset + n > it->second.size()) {
      return DataLoss(file + ": no such bytes");
    }
    std::memcpy(dst, it->second.data() + offset, n);
    return Status::Ok();
  }
  int reads = 0;

 private:
  std::map<std::string, std::vector<char>>* images_;
};

proto::CheckpointMetadata Metadata(const Layout& lay,
                                   const std::map<std::string, std::vector<char>>& images) {
  std::vector<proto::CheckpointMetadata> fragments;
  for (int r = 0; r < lay.world(); ++r) {
    fragments.push_back(
        ImageFragment(PlanRank(kModel, lay, r), r, images.at(RankFileName(r)).data()));
  }
  proto::CheckpointMetadata base;
  base.set_step(3);
  Result<proto::CheckpointMetadata> m =
      MergeFragments(kModel, base, std::move(fragments), "test images");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : proto::CheckpointMetadata();
}

class ChunkTable : public TempDirTest {};

TEST_F(ChunkTable, ImagesReadBackInEveryRegionAndLayout) {
  for (const Layout& lay : {L(2, 1, 2, 1, 2, 1), L(1, 1, 1, 1, 3, 2), L(4, 1, 1, 1, 1, 0)}) {
    std::map<std::string, std::vector<char>> images = Images(lay);
    MemorySource source(&images);
    Result<std::unique_ptr<CheckpointReader>> reader =
        CheckpointReader::OpenFrom(Metadata(lay, images), &source, "test images");
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    for (const ParamInfo& p : ModelLayout(kModel, 1).params) {
      for (int s = 0; s < kNumStates; ++s) {
        const Region r = WholeRegion(p);
        std::vector<float> got(static_cast<size_t>(r.flat_end));
        ASSERT_TRUE((*reader)->Read(p.name, static_cast<StateKind>(s), r, got.data()).ok());
        for (int64_t i = 0; i < r.flat_end; ++i) {
          ASSERT_EQ(got[i], Value(p.name, static_cast<StateKind>(s), i))
              << lay.ToString() << " " << p.name << " state " << s << " element " << i;
        }
      }
    }
    EXPECT_GT(source.reads, 0);
  }
}

TEST_F(ChunkTable, TheSameChunksAsTheFileWriter) {
  const Layout lay = L(2, 1, 2, 1, 2, 1);
  std::map<std::string, std::vector<char>> images = Images(lay);
  const proto::CheckpointMetadata mem = Metadata(lay, images);
  const std::string tmp = TempStepDir(Path("files"), 3);
  for (int r = 0; r < lay.world(); ++r) {
    const RankShardPlan plan = PlanRank(kModel, lay, r);
    auto src = [&](StateKind s, size_t k, std::vector<float>* scratch) -> Result<const float*> {
      *scratch = PieceValues(plan, s, k);
      return static_cast<const float*>(scratch->data());
    };
    ASSERT_TRUE(WriteRankFiles(tmp, r, plan, src).ok());
  }
  proto::CheckpointMetadata base;
  base.set_step(3);
  SetModelSpec(kModel, base.mutable_model());
  SetLayoutSpec(lay, base.mutable_saved_layout());
  Status committed = CommitCheckpoint(Path("files"), tmp, lay.world(), kModel, base);
  ASSERT_TRUE(committed.ok()) << committed.ToString();
  Result<proto::CheckpointMetadata> disk = ReadMetadata(Path("files/step_00000003"));
  ASSERT_TRUE(disk.ok()) << disk.status().ToString();
  ASSERT_EQ(disk->tensors_size(), mem.tensors_size());
  for (int t = 0; t < mem.tensors_size(); ++t) {
    const proto::TensorEntry &a = mem.tensors(t), &b = disk->tensors(t);
    ASSERT_EQ(a.name(), b.name());
    ASSERT_EQ(a.state(), b.state());
    ASSERT_EQ(a.chunks_size(), b.chunks_size());
    for (int c = 0; c < a.chunks_size(); ++c) {
      EXPECT_EQ(a.chunks(c).file(), b.chunks(c).file());
      EXPECT_EQ(a.chunks(c).length(), b.chunks(c).length());
      EXPECT_EQ(a.chunks(c).flat_begin(), b.chunks(c).flat_begin());
      EXPECT_EQ(std::vector<uint32_t>(a.chunks(c).crc32c().begin(), a.chunks(c).crc32c().end()),
                std::vector<uint32_t>(b.chunks(c).crc32c().begin(), b.chunks(c).crc32c().end()))
          << a.name() << " " << a.state() << " chunk " << c;
    }
  }
}

TEST_F(ChunkTable, ADamagedByteOrAFailingSourceIsNamed) {
  const Layout lay = L(1, 1, 1, 1, 2, 1);
  std::map<std::string, std::vector<char>> images = Images(lay);
  const proto::CheckpointMetadata meta = Metadata(lay, images);
  images[RankFileName(1)][40] ^= 1;  // after the index: the CRCs are of the good bytes
  MemorySource source(&images);
  Result<std::unique_ptr<CheckpointReader>> reader =
      CheckpointReader::OpenFrom(meta, &source, "snapshot of step 3");
  ASSERT_TRUE(reader.ok());
  Status bad;
  for (const ParamInfo& p : ModelLayout(kModel, 1).params) {
    const Region r = WholeRegion(p);
    std::vector<float> got(static_cast<size_t>(r.flat_end));
    Status st = (*reader)->Read(p.name, StateKind::kParam, r, got.data());
    if (!st.ok() && bad.ok()) bad = st;
  }
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.message().find("snapshot of step 3/rank_00001.safetensors"), std::string::npos)
      << bad.message();
  EXPECT_NE(bad.message().find("checksum mismatch"), std::string::npos) << bad.message();
  images.erase(RankFileName(0));  // a source that fails
  Status gone;
  for (const ParamInfo& p : ModelLayout(kModel, 1).params) {
    const Region r = WholeRegion(p);
    std::vector<float> got(static_cast<size_t>(r.flat_end));
    Status st = (*reader)->Read(p.name, StateKind::kExpAvg, r, got.data());
    if (!st.ok() && gone.ok()) gone = st;
  }
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.message().find("rank_00000.safetensors: no such bytes"), std::string::npos)
      << gone.message();
}

}  // namespace
}  // namespace loom
