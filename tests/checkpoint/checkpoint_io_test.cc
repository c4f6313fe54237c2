// Writing, committing, reading, verifying and resharding universal checkpoints in one process:
// every rank's files are written here from synthetic values (a pure function of tensor, state
// and global element), then read back through arbitrary regions and other layouts. Corrupted,
// truncated and incomplete checkpoints are refused with the file and chunk named.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "checkpoint/format.h"
#include "checkpoint/inspect.h"
#include "checkpoint/reader.h"
#include "checkpoint/reshard.h"
#include "checkpoint/shard_plan.h"
#include "checkpoint/writer.h"
#include "core/file_util.h"
#include "core/rng.h"
#include "model/layout.h"
#include "tests/checkpoint/layout_helpers.h"
#include "tests/checkpoint/temp_dir_test.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

const ModelConfig kModel{/*vocab=*/257, /*max_seq=*/16, /*layers=*/4, /*heads=*/4, /*hidden=*/8};

float Value(const std::string& name, StateKind s, int64_t global_index) {
  return static_cast<float>(HashString(name.c_str()) % 97) * 10000.0f +
         static_cast<float>(s) * 1000.0f + static_cast<float>(global_index % 1000) +
         static_cast<float>(global_index / 1000) * 0.5f;
}

proto::CheckpointMetadata Base(int64_t step, const Layout& lay, const ModelConfig& model = kModel) {
  proto::CheckpointMetadata m;
  m.set_step(step);
  m.mutable_model()->set_arch("gpt2");
  m.mutable_model()->set_vocab(model.vocab);
  m.mutable_model()->set_max_seq(model.max_seq);
  m.mutable_model()->set_layers(model.layers);
  m.mutable_model()->set_heads(model.heads);
  m.mutable_model()->set_hidden(model.hidden);
  m.mutable_saved_layout()->set_tp(lay.tp);
  m.mutable_saved_layout()->set_pp(lay.pp);
  m.mutable_saved_layout()->set_dp(lay.dp);
  m.mutable_data()->set_seq(16);
  m.mutable_data()->set_global_batch(8);
  m.mutable_optimizer()->set_step_count(step);
  return m;
}

// Writes a committed checkpoint of the synthetic values for `lay` under `root`.
void WriteSynthetic(const std::string& root, int64_t step, const Layout& lay, int keep = 0,
                    const ModelConfig& model = kModel) {
  const std::string tmp = TempStepDir(root, step);
  for (int r = 0; r < lay.world(); ++r) {
    const RankShardPlan plan = PlanRank(model, lay, r);
    auto source = [&](StateKind s, size_t k, std::vector<float>* scratch) -> Result<const float*> {
      const Piece& p = plan.writes[k];
      const ParamInfo& info = plan.layout.params[static_cast<size_t>(p.param)];
      int64_t rows, cols;
      GlobalMatrix(info, &rows, &cols);
      scratch->clear();
      const Region& g = p.region;
      for (int64_t i = g.flat_begin; i < g.flat_end; ++i) {
        scratch->push_back(Value(info.name, s, (g.row0 + i / g.cols) * cols + g.col0 + i % g.cols));
      }
      return static_cast<const float*>(scratch->data());
    };
    ASSERT_TRUE(WriteRankFiles(tmp, r, plan, source).ok());
  }
  Status st = CommitCheckpoint(root, tmp, lay.world(), model, Base(step, lay, model));
  ASSERT_TRUE(st.ok()) << st.ToString();
  st = ApplyRetention(root, keep, /*keep_every=*/0, step);
  ASSERT_TRUE(st.ok()) << st.ToString();
}

// Every element of every tensor and state, read as one whole region, equals its synthetic value.
void ExpectSynthetic(const std::string& dir) {
  auto reader = CheckpointReader::Open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  for (const ParamInfo& p : ModelLayout(kModel, 1).params) {
    for (int s = 0; s < kNumStates; ++s) {
      const Region r = WholeRegion(p);
      std::vector<float> got(static_cast<size_t>(r.flat_end));
      Status st = (*reader)->Read(p.name, static_cast<StateKind>(s), r, got.data());
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (int64_t i = 0; i < r.flat_end; ++i) {
        ASSERT_EQ(got[static_cast<size_t>(i)], Value(p.name, static_cast<StateKind>(s), i))
            << p.name << " state " << s << " element " << i;
      }
    }
  }
}

class CheckpointIo : public TempDirTest {};

TEST_F(CheckpointIo, RandomRegionsReadBackExactly) {
  const Layout a = L(2, 1, 2, 1, 2, 1);
  WriteSynthetic(Path("a"), 5, a);
  const std::string step_dir = Path("a/step_00000005");
  EXPECT_EQ(ReadLatest(Path("a")), "step_00000005");
  ExpectSynthetic(step_dir);
  auto reader = CheckpointReader::Open(step_dir);
  ASSERT_TRUE(reader.ok());
  std::mt19937 rng(3);
  for (const ParamInfo& p : ModelLayout(kModel, 1).params) {
    int64_t rows, cols;
    GlobalMatrix(p, &rows, &cols);
    for (int trial = 0; trial < 20; ++trial) {
      Region r;
      r.row0 = std::uniform_int_distribution<int64_t>(0, rows - 1)(rng);
      r.rows = std::uniform_int_distribution<int64_t>(1, rows - r.row0)(rng);
      r.col0 = std::uniform_int_distribution<int64_t>(0, cols - 1)(rng);
      r.cols = std::uniform_int_distribution<int64_t>(1, cols - r.col0)(rng);
      r.flat_begin = std::uniform_int_distribution<int64_t>(0, r.rows * r.cols - 1)(rng);
      r.flat_end = std::uniform_int_distribution<int64_t>(r.flat_begin + 1, r.rows * r.cols)(rng);
      std::vector<float> got(static_cast<size_t>(r.size()));
      ASSERT_TRUE((*reader)->Read(p.name, StateKind::kExpAvgSq, r, got.data()).ok());
      for (int64_t i = r.flat_begin; i < r.flat_end; ++i) {
        const int64_t g = (r.row0 + i / r.cols) * cols + r.col0 + i % r.cols;
        ASSERT_EQ(got[static_cast<size_t>(i - r.flat_begin)],
                  Value(p.name, StateKind::kExpAvgSq, g))
            << p.name << " " << r.ToString();
      }
    }
  }
  auto rep = VerifyCheckpoint(Path("a"));
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->tensors, 3 * static_cast<int>(ModelLayout(kModel, 1).params.size()));
}

// Reads planned with PlanReads and served by a read-ahead stream of small pieces (split, merged,
// the ring wrapped many times) equal the synthetic values, for regions that read whole chunks
// and blocks of chunks alike (column slabs of tp=2 of up to 4 checksum blocks, so that reads
// start past a chunk's first block); a read that was not planned is refused.
TEST_F(CheckpointIo, PlannedStreamReadsEqualPlainReads) {
  const ModelConfig kWide{/*vocab=*/257, /*max_seq=*/16, /*layers=*/1, /*heads=*/4,
                          /*hidden=*/512};
  WriteSynthetic(Path("a"), 5, L(2, 1, 1, 1, 2, 1), 0, kWide);
  const std::string dir = Path("a/step_00000005");
  auto reader = CheckpointReader::Open(dir);
  ASSERT_TRUE(reader.ok());
  struct Ask {
    const ParamInfo* p;
    StateKind s;
    Region r;
  };
  std::vector<Ask> asks;
  const ParamLayout layout = ModelLayout(kWide, 1);
  std::mt19937 rng(5);
  for (const ParamInfo& p : layout.params) {
    int64_t rows, cols;
    GlobalMatrix(p, &rows, &cols);
    for (int s = 0; s < kNumStates; ++s) {
      asks.push_back({&p, static_cast<StateKind>(s), WholeRegion(p)});
      Region r;
      r.row0 = std::uniform_int_distribution<int64_t>(0, rows - 1)(rng);
      r.rows = std::uniform_int_distribution<int64_t>(1, rows - r.row0)(rng);
      r.col0 = std::uniform_int_distribution<int64_t>(0, cols - 1)(rng);
      r.cols = std::uniform_int_distribution<int64_t>(1, cols - r.col0)(rng);
      r.flat_end = r.rows * r.cols;
      asks.push_back({&p, static_cast<StateKind>(s), r});
    }
  }
  std::vector<FileRange> ranges;
  for (const Ask& a : asks) (*reader)->PlanReads(a.p->name, a.s, a.r, &ranges);
  // Some reads start past a chunk's first checksum block (ReadBlocks with first > 0).
  std::set<std::pair<std::string, uint64_t>> chunk_starts;
  for (const proto::TensorEntry& t : (*reader)->meta().tensors()) {
    for (const proto::Chunk& c : t.chunks()) chunk_starts.insert({c.file(), c.offset()});
  }
  EXPECT_TRUE(std::any_of(ranges.begin(), ranges.end(), [&](const FileRange& r) {
    return chunk_starts.count({r.file, r.offset}) == 0;
  }));
  for (bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "O_DIRECT" : "page cache");
    // Out of the page cache, so that the stream reads them from the disk.
    for (const auto& e : fs::directory_iterator(dir)) {
      const int fd = ::open(e.path().c_str(), O_RDONLY);
      ASSERT_GE(fd, 0);
      ::fsync(fd);
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
    auto stream = DirectStream::Open(dir, ranges, 64 * DirectStream::kAlignment, 3, 2, direct);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    (*reader)->SetStream(stream->get());
    for (const Ask& a : asks) {
      int64_t cols = 0, rows = 0;
      GlobalMatrix(*a.p, &rows, &cols);
      std::vector<float> got(static_cast<size_t>(a.r.size()));
      Status st = (*reader)->Read(a.p->name, a.s, a.r, got.data());
      ASSERT_TRUE(st.ok()) << st.ToString();
      for (int64_t i = 0; i < a.r.size(); ++i) {
        const int64_t g = (a.r.row0 + i / a.r.cols) * cols + a.r.col0 + i % a.r.cols;
        ASSERT_EQ(got[static_cast<size_t>(i)], Value(a.p->name, a.s, g))
            << a.p->name << " " << a.r.ToString();
      }
    }
    EXPECT_TRUE((*stream)->Done().ok());
    // O_DIRECT where asked for and this file system has it (ext4 does, tmpfs does not).
    const int probe = ::open(JoinPath(dir, RankFileName(0)).c_str(), O_RDONLY | O_DIRECT);
    if (probe >= 0) ::close(probe);
    EXPECT_EQ((*stream)->direct_pieces() > 0, direct && probe >= 0);
    (*reader)->SetStream(nullptr);
  }
  // Planned for the first tensor; asked for the second one.
  std::vector<FileRange> one;
  (*reader)->PlanReads(asks[0].p->name, asks[0].s, asks[0].r, &one);
  auto stream = DirectStream::Open(dir, one, 3 * DirectStream::kAlignment, 3, 2);
  ASSERT_TRUE(stream.ok());
  (*reader)->SetStream(stream->get());
  const Ask& other = asks[2 * kNumStates];
  ASSERT_NE(other.p, asks[0].p);
  std::vector<float> got(static_cast<size_t>(other.r.size()));
  Status st = (*reader)->Read(other.p->name, other.s, other.r, got.data());
  EXPECT_EQ(st.code(), StatusCode::kInternal) << st.ToString();
  EXPECT_NE(st.message().find("was not planned next"), std::string::npos) << st.message();
  (*reader)->SetStream(nullptr);
}

TEST_F(CheckpointIo, ReshardEqualsWhatTheTargetLayoutWrites) {
  const Layout a = L(2, 1, 2, 1, 2, 1);
  WriteSynthetic(Path("a"), 5, a);
  for (const Layout& b :
       {L(1, 1, 4, 1, 2, 3), L(4, 1, 1, 1, 2, 2), L(1, 2, 2, 2, 1, 0), L(1, 1, 1, 1, 1, 0)}) {
    SCOPED_TRACE(b.ToString());
    const std::string out = Path("r" + std::to_string(b.world()) + std::to_string(b.tp));
    fs::remove_all(out);
    auto res = Reshard(Path("a"), b, out);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    ExpectSynthetic(res->dir);
    // The same bytes as a direct save with layout b (zero and sp do not change what is written).
    WriteSynthetic(out + "_direct", 5, b);
    for (const auto& e : fs::directory_iterator(res->dir)) {
      const std::string name = e.path().filename().string();
      auto x = ReadFile(e.path().string()), y = ReadFile(out + "_direct/step_00000005/" + name);
      ASSERT_TRUE(x.ok() && y.ok()) << name;
      if (name == kMetadataFile) continue;  // saved_layout differs in zero/cp fields only
      EXPECT_TRUE(*x == *y) << name << " differs";
    }
  }
}

TEST_F(CheckpointIo, FlippedByteIsNamedByFileAndChunk) {
  WriteSynthetic(Path("a"), 5, L(2, 1, 1, 1, 2, 0));
  const std::string file = Path("a/step_00000005/rank_00001.safetensors");
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-5, std::ios::end);
    char c;
    f.get(c);
    f.seekp(-5, std::ios::end);
    f.put(static_cast<char>(c ^ 0x40));
  }
  auto rep = VerifyCheckpoint(Path("a"));
  ASSERT_FALSE(rep.ok());
  EXPECT_EQ(rep.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(rep.status().message().find("rank_00001.safetensors"), std::string::npos)
      << rep.status().message();
  EXPECT_NE(rep.status().message().find("chunk"), std::string::npos);
  EXPECT_NE(rep.status().message().find("checksum mismatch"), std::string::npos);
  // The resharder (reading ahead through its stream) names it too and leaves nothing behind.
  auto res = Reshard(Path("a"), L(1, 1, 1, 1, 1, 0), Path("out"));
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), StatusCode::kDataLoss) << res.status().ToString();
  EXPECT_NE(res.status().message().find("rank_00001.safetensors: tensor '"), std::string::npos)
      << res.status().message();
  EXPECT_NE(res.status().message().find("checksum mismatch"), std::string::npos);
  EXPECT_TRUE(!fs::exists(Path("out")) || fs::is_empty(Path("out")));
}

TEST_F(CheckpointIo, TruncatedFileIsRefusedOnOpen) {
  WriteSynthetic(Path("a"), 5, L(2, 1, 1, 1, 1, 0));
  const std::string file = Path("a/step_00000005/rank_00000.safetensors");
  fs::resize_file(file, fs::file_size(file) - 100);
  auto r = CheckpointReader::Open(Path("a/step_00000005"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rank_00000.safetensors: truncated"), std::string::npos)
      << r.status().message();
  fs::remove(file);
  r = CheckpointReader::Open(Path("a/step_00000005"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing data file"), std::string::npos);
  fs::create_directory(file);  // a directory in its place
  r = CheckpointReader::Open(Path("a/step_00000005"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rank_00000.safetensors: not a regular file"),
            std::string::npos)
      << r.status().message();
}

// The data files are safetensors files other tools open by themselves: verify checks that their
// own headers agree with the metadata (loading uses only the metadata, so only verify can tell).
TEST_F(CheckpointIo, DamagedSafetensorsHeaderIsNamedByVerify) {
  WriteSynthetic(Path("a"), 5, L(2, 1, 1, 1, 1, 0));
  const std::string file = Path("a/step_00000005/rank_00001.safetensors");
  const std::string good = *ReadFile(file);
  ASSERT_TRUE(VerifyCheckpoint(Path("a")).ok());
  // One digit of a data offset in the header (the JSON stays valid).
  std::string bad = good;
  const size_t at = bad.find("\"data_offsets\":[");
  ASSERT_NE(at, std::string::npos);
  const size_t digit = bad.find_first_of("123456789", at + 16);
  ASSERT_NE(digit, std::string::npos);
  bad[digit] = bad[digit] == '9' ? '8' : static_cast<char>(bad[digit] + 1);
  ASSERT_TRUE(WriteFileAtomic(file, bad).ok());
  auto rep = VerifyCheckpoint(Path("a"));
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find(file), std::string::npos) << rep.status().message();
  EXPECT_NE(rep.status().message().find("safetensors header"), std::string::npos)
      << rep.status().message();
  // An entry renamed (same length: the file still parses) no longer names its chunk.
  bad = good;
  const size_t name = bad.find("/exp_avg/");
  ASSERT_NE(name, std::string::npos);
  bad[name + 7] = 'h';  // "/exp_avh/"
  ASSERT_TRUE(WriteFileAtomic(file, bad).ok());
  rep = VerifyCheckpoint(Path("a"));
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find(file + ": tensor '"), std::string::npos)
      << rep.status().message();
  EXPECT_NE(rep.status().message().find("the file's safetensors header has no entry"),
            std::string::npos)
      << rep.status().message();
  // Its length field.
  bad = good;
  for (int i = 0; i < 8; ++i) bad[static_cast<size_t>(i)] = static_cast<char>(0xff);
  ASSERT_TRUE(WriteFileAtomic(file, bad).ok());
  rep = VerifyCheckpoint(Path("a"));
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find(file), std::string::npos) << rep.status().message();
  // Loading still works from the metadata alone.
  EXPECT_TRUE(CheckpointReader::Open(Path("a/step_00000005")).ok());
}

TEST_F(CheckpointIo, DeletedChunkIsNamed) {
  WriteSynthetic(Path("a"), 5, L(2, 1, 1, 1, 2, 0));
  const std::string meta_path = Path("a/step_00000005/metadata.json");
  nlohmann::json j = nlohmann::json::parse(*ReadFile(meta_path));
  std::string victim;
  for (auto& t : j["tensors"]) {
    if (t["name"] == "h.1.mlp.c_fc.weight" && t["state"] == "exp_avg") {
      ASSERT_GT(t["chunks"].size(), 1u);
      t["chunks"].erase(1);
    }
  }
  ASSERT_TRUE(WriteFileAtomic(meta_path, *SealMetadataJson(j.dump())).ok());
  auto rep = VerifyCheckpoint(Path("a"));
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find("tensor 'h.1.mlp.c_fc.weight' state 'exp_avg'"),
            std::string::npos)
      << rep.status().message();
  EXPECT_NE(rep.status().message().find("a chunk is missing"), std::string::npos);
  // Loading refuses it when opening, before reading anything.
  auto reader = CheckpointReader::Open(Path("a/step_00000005"));
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().message().find("tensor 'h.1.mlp.c_fc.weight' state 'exp_avg'"),
            std::string::npos);
  EXPECT_NE(reader.status().message().find("a chunk is missing"), std::string::npos)
      << reader.status().message();
}

TEST_F(CheckpointIo, DuplicatedChunksAndEntriesAreRefused) {
  WriteSynthetic(Path("a"), 5, L(2, 1, 1, 1, 2, 0));
  const std::string meta_path = Path("a/step_00000005/metadata.json");
  const std::string good = *ReadFile(meta_path);
  // A chunk listed twice (with another missing it would still add up to the right count).
  nlohmann::json j = nlohmann::json::parse(good);
  for (auto& t : j["tensors"]) {
    if (t["name"] == "wte" && t["state"] == "param") t["chunks"][1] = t["chunks"][0];
  }
  ASSERT_TRUE(WriteFileAtomic(meta_path, *SealMetadataJson(j.dump())).ok());
  auto reader = CheckpointReader::Open(Path("a/step_00000005"));
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().message().find("overlaps another chunk"), std::string::npos)
      << reader.status().message();
  // A tensor entry listed twice.
  j = nlohmann::json::parse(good);
  j["tensors"].push_back(j["tensors"][0]);
  ASSERT_TRUE(WriteFileAtomic(meta_path, *SealMetadataJson(j.dump())).ok());
  reader = CheckpointReader::Open(Path("a/step_00000005"));
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().message().find("is listed twice"), std::string::npos);
  // A chunk pointing outside the directory.
  j = nlohmann::json::parse(good);
  j["tensors"][0]["chunks"][0]["file"] = "../elsewhere";
  ASSERT_TRUE(WriteFileAtomic(meta_path, *SealMetadataJson(j.dump())).ok());
  reader = CheckpointReader::Open(Path("a/step_00000005"));
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().message().find("is not a file name of this directory"),
            std::string::npos);
}

TEST_F(CheckpointIo, BadMetadataIsNamed) {
  WriteSynthetic(Path("a"), 5, L(1, 1, 1, 1, 1, 0));
  const std::string meta_path = Path("a/step_00000005/metadata.json");
  const std::string good = *ReadFile(meta_path);
  ASSERT_TRUE(WriteFileAtomic(meta_path, good.substr(0, good.size() / 2)).ok());
  auto r = ReadMetadata(Path("a/step_00000005"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("metadata.json: not a checkpoint metadata file"),
            std::string::npos)
      << r.status().message();
  nlohmann::json j = nlohmann::json::parse(good);
  j["format_version"] = 99;
  ASSERT_TRUE(WriteFileAtomic(meta_path, *SealMetadataJson(j.dump())).ok());
  r = ReadMetadata(Path("a/step_00000005"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("field 'format_version': expected 1 to 3, got 99"),
            std::string::npos)
      << r.status().message();
  j = nlohmann::json::parse(good);
  j["tensors"][3]["chunks"][0]["length"] = "12";
  ASSERT_TRUE(WriteFileAtomic(meta_path, *SealMetadataJson(j.dump())).ok());
  r = ReadMetadata(Path("a/step_00000005"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("chunk 0: field 'length' is 12"), std::string::npos)
      << r.status().message();
  for (const char* offset : {"99999999999", "18446744073709551000"}) {  // the latter wraps
    j = nlohmann::json::parse(good);
    j["tensors"][3]["chunks"][0]["offset"] = offset;
    ASSERT_TRUE(WriteFileAtomic(meta_path, *SealMetadataJson(j.dump())).ok());
    r = ReadMetadata(Path("a/step_00000005"));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("chunk 0: bytes " + std::string(offset) + " + "),
              std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("lie beyond the end of 'rank_00000.safetensors'"),
              std::string::npos)
        << r.status().message();
  }
}

// Numbers chosen so that sums and products of them wrap (found by fuzzing `loom ckpt`): each is
// refused by ReadMetadata, naming the field, instead of passing as valid (a checksum block count
// of 0 read no data and then crashed; a region of 2^63 rows looked in range and made the
// coverage check allocate until memory ran out).
TEST_F(CheckpointIo, WrappingNumbersInTheMetadataAreRefused) {
  WriteSynthetic(Path("a"), 5, L(2, 1, 1, 1, 2, 0));
  const std::string dir = Path("a/step_00000005"), meta_path = dir + "/metadata.json";
  const std::string good = *ReadFile(meta_path);
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* expect;
  };
  auto chunk_of = [](nlohmann::json& j, const std::string& name) -> nlohmann::json& {
    for (auto& t : j["tensors"]) {
      if (t["name"] == name && t["state"] == "param") return t["chunks"][0];
    }
    ADD_FAILURE() << "no tensor " << name;
    return j;
  };
  const std::vector<Case> cases = {
      {"block size 2^64-1 with no checksums",
       [](nlohmann::json& j) {
         j["checksum_block_bytes"] = "18446744073709551615";
         for (auto& t : j["tensors"]) {
           for (auto& c : t["chunks"]) c["crc32c"] = nlohmann::json::array();
         }
       },
       "field 'checksum_block_bytes': expected a block size from 1 to 1099511627776, got "
       "18446744073709551615"},
      {"rows 1 + (2^63-1)",
       [&](nlohmann::json& j) {
         nlohmann::json& c = chunk_of(j, "h.0.attn.c_attn.weight");
         c["region_offsets"] = {"1", "0"};
         c["region_sizes"] = {"9223372036854775807", "1"};
         c["flat_begin"] = "0";
         c["flat_end"] = "4611686018427453952";  // (flat_end - flat_begin) * 4 wraps as well
       },
       "fields 'region_offsets' and 'region_sizes': rows 1 + 9223372036854775807"},
      {"column offset 2^63-1 in a full-width chunk",
       [&](nlohmann::json& j) {
         chunk_of(j, "h.0.attn.c_attn.weight")["region_offsets"][1] = "9223372036854775807";
       },
       "columns 9223372036854775807 + "},
      {"rows 2^56 + (2^63 - 2^56 + 256)",
       [&](nlohmann::json& j) {
         nlohmann::json& c = chunk_of(j, "wte");
         c["region_offsets"][0] = "72057594037927936";
         c["region_sizes"][0] = "9151314442816848128";
       },
       "rows 72057594037927936 + 9151314442816848128"},
      {"Llama 3.1's rope scaling on a GPT-2 model",
       [](nlohmann::json& j) {
         j["model"]["rope_scaling"] = {{"type", "llama3"}, {"factor", 8}};
       },
       "field 'model.rope_scaling.type': expected llama3 on a llama model, got 'llama3' on gpt2"},
      {"layout tp=0", [](nlohmann::json& j) { j["saved_layout"]["tp"] = 0; },
       "field 'saved_layout': expected tp, pp and dp of at least 1"},
      {"layout of 2^62 ranks",
       [](nlohmann::json& j) {
         j["saved_layout"]["tp"] = 2147483647;
         j["saved_layout"]["dp"] = 2147483647;
       },
       "field 'saved_layout'"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = nlohmann::json::parse(good);
    c.edit(j);
    ASSERT_TRUE(WriteFileAtomic(meta_path, *SealMetadataJson(j.dump())).ok());
    for (const Status& st : {ReadMetadata(dir).status(), VerifyCheckpoint(dir).status(),
                             CheckpointReader::Open(dir).status()}) {
      ASSERT_FALSE(st.ok()) << c.what;
      EXPECT_NE(st.message().find(meta_path + ": "), std::string::npos) << st.message();
      EXPECT_NE(st.message().find(c.expect), std::string::npos) << c.what << ": " << st.message();
    }
  }
  ASSERT_TRUE(WriteFileAtomic(meta_path, good).ok());
  EXPECT_TRUE(VerifyCheckpoint(dir).ok());
}

// Provenance strings must be UTF-8 (Protobuf's JSON printer drops other bytes).
TEST(Provenance, Utf8IsCheckedAndPathsAreMarked) {
  EXPECT_TRUE(IsUtf8("model: {layers: 2}  # caf\xc3\xa9, \xe2\x82\xac, \xf0\x9f\x98\x80"));
  for (const char* bad :
       {"caf\xe9 x", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff"}) {
    EXPECT_FALSE(IsUtf8(bad)) << bad;
  }
  EXPECT_EQ(Utf8OrMarked("/runs/caf\xe9/job.yaml"), "/runs/caf?/job.yaml");
  EXPECT_EQ(Utf8OrMarked("/runs/caf\xc3\xa9/job.yaml"), "/runs/caf\xc3\xa9/job.yaml");
  EXPECT_EQ(Utf8OrMarked("\xe2\x82"), "??");  // a sequence cut short
}

// metadata.json and `latest` are read only when they are regular files: a FIFO is refused at
// once rather than waited on, a link to /dev/zero rather than read until memory runs out.
TEST_F(CheckpointIo, MetadataThatIsNotAFileIsRefusedWithoutWaiting) {
  WriteSynthetic(Path("a"), 5, L(1, 1, 1, 1, 1, 0));
  const std::string dir = Path("a/step_00000005"), meta_path = dir + "/metadata.json";
  ASSERT_EQ(ReadLatest(Path("a")), "step_00000005");
  fs::rename(meta_path, Path("kept.json"));
  ASSERT_EQ(::mkfifo(meta_path.c_str(), 0644), 0);
  Result<proto::CheckpointMetadata> r = ReadMetadata(dir);  // would block without O_NONBLOCK
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "'" + meta_path + "': expected a regular file, found a FIFO");
  fs::remove(meta_path);
  fs::create_symlink("/dev/zero", meta_path);
  r = ReadMetadata(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "'" + meta_path + "': expected a regular file, found a character device");
  auto verified = VerifyCheckpoint(Path("a"));
  ASSERT_FALSE(verified.ok());
  EXPECT_NE(verified.status().message().find("found a character device"), std::string::npos)
      << verified.status().message();
  fs::remove(meta_path);
  fs::rename(Path("kept.json"), meta_path);
  ASSERT_TRUE(VerifyCheckpoint(Path("a")).ok());
  // The pointer: a FIFO, a device or a huge file is no pointer (resumes never use it).
  const std::string latest = Path("a/latest");
  fs::remove(latest);
  ASSERT_EQ(::mkfifo(latest.c_str(), 0644), 0);
  EXPECT_EQ(ReadLatest(Path("a")), "");
  fs::remove(latest);
  fs::create_symlink("/dev/zero", latest);
  EXPECT_EQ(ReadLatest(Path("a")), "");
  fs::remove(latest);
  ASSERT_TRUE(WriteFileAtomic(latest, std::string(5000, 's')).ok());
  EXPECT_EQ(ReadLatest(Path("a")), "");
  // A stale pointer is shown as such by inspect.
  ASSERT_TRUE(WriteFileAtomic(latest, "step_00000099\n").ok());
  Status files;
  Result<std::string> shown = DescribeCheckpoint(Path("a"), &files);
  ASSERT_TRUE(shown.ok()) << shown.status().message();
  EXPECT_NE(shown->find("latest step_00000099 (not a checkpoint here; resumes ignore the pointer)"),
            std::string::npos)
      << *shown;
  ASSERT_TRUE(WriteFileAtomic(latest, "step_00000005\n").ok());
  shown = DescribeCheckpoint(Path("a"), &files);
  ASSERT_TRUE(shown.ok());
  EXPECT_NE(shown->find("latest step_00000005;"), std::string::npos) << *shown;
}

// The metadata file carries its own CRC-32C: a changed digit that keeps the JSON valid (the step,
// a chunk's offset) is caught; an edit that is sealed again still has to name its own directory.
TEST_F(CheckpointIo, EditedMetadataIsCaughtByItsChecksum) {
  WriteSynthetic(Path("a"), 5, L(1, 1, 1, 1, 1, 0));
  const std::string dir = Path("a/step_00000005"), meta_path = dir + "/metadata.json";
  const std::string good = *ReadFile(meta_path);
  ASSERT_TRUE(ReadMetadata(dir).ok());
  ASSERT_TRUE(VerifyCheckpoint(dir).ok());
  const size_t at = good.find("\"step\": \"5\"");
  ASSERT_NE(at, std::string::npos) << good.substr(0, 200);
  std::string bad = good;
  bad[at + 9] = '6';  // "step": "6"
  ASSERT_TRUE(WriteFileAtomic(meta_path, bad).ok());
  for (const Status& st : {ReadMetadata(dir).status(), VerifyCheckpoint(dir).status(),
                           CheckpointReader::Open(dir).status()}) {
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find(meta_path + ": field 'metadata_crc32c': the file's CRC-32C is "),
              std::string::npos)
        << st.message();
  }
  // One flipped bit in a chunk's offset.
  bad = good;
  const size_t off = good.find("\"offset\": \"");
  ASSERT_NE(off, std::string::npos);
  bad[off + 11] ^= 1;
  ASSERT_TRUE(WriteFileAtomic(meta_path, bad).ok());
  EXPECT_FALSE(ReadMetadata(dir).ok());
  // Sealed again, the step must still be the directory's.
  bad = good;
  bad[at + 9] = '6';
  ASSERT_TRUE(WriteFileAtomic(meta_path, *SealMetadataJson(bad)).ok());
  auto r = ReadMetadata(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("field 'step': 6, but the directory is step_00000005"),
            std::string::npos)
      << r.status().message();
  // Under another name (a copy for safekeeping) it loads.
  fs::rename(dir, Path("a/kept"));
  EXPECT_TRUE(ReadMetadata(Path("a/kept")).ok());
  // Without the field: refused, naming it.
  nlohmann::json j = nlohmann::json::parse(good);
  j.erase("metadata_crc32c");
  ASSERT_TRUE(WriteFileAtomic(Path("a/kept/metadata.json"), j.dump()).ok());
  r = ReadMetadata(Path("a/kept"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("field 'metadata_crc32c': missing"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(SealMetadataJson(j.dump()).ok());
  // A version 1 file (written before metadata checksums) is read without one; a version 3 file
  // whose version reads 2 (one flipped bit) still has the field, which no longer matches.
  j["format_version"] = 1;
  ASSERT_TRUE(WriteFileAtomic(Path("a/kept/metadata.json"), j.dump()).ok());
  EXPECT_TRUE(ReadMetadata(Path("a/kept")).ok());
  bad = good;
  const size_t version = bad.find("\"format_version\": 3");
  ASSERT_NE(version, std::string::npos);
  bad[version + 18] = '2';
  ASSERT_TRUE(WriteFileAtomic(Path("a/kept/metadata.json"), bad).ok());
  r = ReadMetadata(Path("a/kept"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("field 'metadata_crc32c': the file's CRC-32C is"),
            std::string::npos)
      << r.status().message();
  // Sealed again as version 2 (as builds before provenance wrote them): read; and as version 1
  // (as a few builds wrote them): read.
  ASSERT_TRUE(WriteFileAtomic(Path("a/kept/metadata.json"), *SealMetadataJson(bad)).ok());
  EXPECT_TRUE(ReadMetadata(Path("a/kept")).ok());
  bad[version + 18] = '1';
  ASSERT_TRUE(WriteFileAtomic(Path("a/kept/metadata.json"), *SealMetadataJson(bad)).ok());
  EXPECT_TRUE(ReadMetadata(Path("a/kept")).ok());
}

TEST_F(CheckpointIo, OnlyCommittedDirectoriesCountAndRetentionKeepsTheNewest) {
  for (int64_t step : {10, 20, 30}) WriteSynthetic(Path("a"), step, L(1, 1, 1, 1, 2, 1), 2);
  auto list = ListCheckpoints(Path("a"));
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].first, 30);
  EXPECT_EQ(list[1].first, 20);
  EXPECT_EQ(ReadLatest(Path("a")), "step_00000030");
  // An interrupted save and a directory without metadata are never checkpoints.
  fs::create_directories(Path("a/step_00000040.tmp"));
  fs::create_directories(Path("a/step_00000050"));
  list = ListCheckpoints(Path("a"));
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].first, 30);
  auto resolved = ResolveCheckpointDir(Path("a"));
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(fs::path(*resolved).filename(), "step_00000030");
}

// keep_every: milestones stay besides the newest `keep` (as Orbax's keep_period).
TEST_F(CheckpointIo, RetentionKeepsMilestones) {
  for (int64_t step = 10; step <= 70; step += 10)
    WriteSynthetic(Path("a"), step, L(1, 1, 1, 1, 1, 0));
  ASSERT_TRUE(ApplyRetention(Path("a"), 2, 30, 70).ok());
  std::vector<int64_t> steps;
  for (const auto& [step, dir] : ListCheckpoints(Path("a"))) steps.push_back(step);
  EXPECT_EQ(steps, std::vector<int64_t>({70, 60, 30}));
  // Nothing half-deleted is left.
  for (const auto& e : fs::directory_iterator(Path("a"))) {
    EXPECT_EQ(e.path().filename().string().find(".deleting"), std::string::npos) << e.path();
  }
  // Without milestones only the newest two stay.
  ASSERT_TRUE(ApplyRetention(Path("a"), 2, 0, 70).ok());
  EXPECT_EQ(ListCheckpoints(Path("a")).size(), 2u);
}

TEST_F(CheckpointIo, ReSavingAStepReplacesItWhole) {
  WriteSynthetic(Path("a"), 5, L(2, 1, 1, 1, 1, 0));
  WriteSynthetic(Path("a"), 5, L(1, 1, 1, 1, 2, 0));  // same step, another layout
  auto list = ListCheckpoints(Path("a"));
  ASSERT_EQ(list.size(), 1u);
  auto meta = ReadMetadata(list[0].second);
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->saved_layout().dp(), 2);  // the second save
  EXPECT_EQ(meta->files_size(), 2);
  for (const auto& e : fs::directory_iterator(Path("a"))) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
  ExpectSynthetic(list[0].second);
}

TEST(LayoutSpec, ParsesAndNamesBadItems) {
  auto l = ParseLayoutSpec("tp=2,pp=4,vpp=2,dp=2,zero=3,sp=1");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->tp, 2);
  EXPECT_EQ(l->pp, 4);
  EXPECT_EQ(l->vpp, 2);
  EXPECT_EQ(l->cp, 1);
  EXPECT_EQ(l->zero, 3);
  EXPECT_TRUE(l->sp);
  auto bad = ParseLayoutSpec("tp=2,pq=4");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("item 'pq=4'"), std::string::npos);
  bad = ParseLayoutSpec("tp=two");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("got 'two'"), std::string::npos);
  // Mistakes that once fell back to defaults silently.
  const std::pair<const char*, const char*> mistakes[] = {
      {"tp=2,tp=1", "'tp' is given twice"},
      {"", "expected key=value items"},
      {",", "item 1 is empty"},
      {"tp=1,,dp=1", "item 2 is empty"},
      {"tp=1,", "item 2 is empty"},
      {"sp=7", "expected 0 (off) or 1 (on), got '7'"},
  };
  for (const auto& [spec, why] : mistakes) {
    bad = ParseLayoutSpec(spec);
    ASSERT_FALSE(bad.ok()) << spec;
    EXPECT_NE(bad.status().message().find(why), std::string::npos) << bad.status().message();
  }
  EXPECT_FALSE(ParseLayoutSpec("sp=0")->sp);
  auto uneven = ParseLayoutSpec("pp=4,first_stage_layers=1,last_stage_layers=2");
  ASSERT_TRUE(uneven.ok());
  EXPECT_EQ(uneven->first_stage_layers, 1);
  EXPECT_EQ(uneven->last_stage_layers, 2);
}

}  // namespace
}  // namespace loom
