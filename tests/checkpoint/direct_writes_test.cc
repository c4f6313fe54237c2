// The O_DIRECT write pool and RankFileWriter's staged output: the files it writes are byte for
// byte those of plain buffered writes, whether pieces come in file order or not, and a failed
// write is reported with the file named, without losing buffers.
#include "checkpoint/direct_writes.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>

#include "checkpoint/shard_plan.h"
#include "checkpoint/writer.h"
#include "core/file_util.h"
#include "model/config.h"
#include "tests/checkpoint/layout_helpers.h"
#include "tests/checkpoint/temp_dir_test.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// Pieces of up to 66 KB (wte: 257 x 64 floats), larger than the pool's buffers below.
const ModelConfig kModel{/*vocab=*/257, /*max_seq=*/16, /*layers=*/2, /*heads=*/4, /*hidden=*/64};

class DirectWrites : public TempDirTest {};

// Values of piece k of `state`: distinct per rank, state, piece and element.
std::vector<float> PieceValues(int rank, StateKind state, size_t k, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    v[static_cast<size_t>(i)] =
        static_cast<float>(rank * 1000000 + static_cast<int>(state) * 100000 +
                           static_cast<int>(k) * 1000) +
        static_cast<float>(i) * 0.25f;
  }
  return v;
}

// Writes rank `rank`'s file of `lay` into `tmp`, pieces in `order` (indices into state x piece),
// staged through `pool` when given; returns the file's bytes.
std::string WriteFile(const std::string& tmp, const Layout& lay, int rank,
                      const std::vector<size_t>& order, DirectWritePool* pool) {
  const RankShardPlan plan = PlanRank(kModel, lay, rank);
  auto w = RankFileWriter::Open(tmp, rank, plan);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return "";
  if (pool != nullptr) (*w)->EnableStaging(pool);
  const size_t pieces = plan.writes.size();
  for (size_t slot : order) {
    const StateKind state = static_cast<StateKind>(slot / pieces);
    const size_t k = slot % pieces;
    const std::vector<float> v = PieceValues(rank, state, k, plan.writes[k].region.size());
    Status st;
    if (k % 2 == 0) {
      st = (*w)->Put(state, k, v.data());
    } else {  // scattered: three parts
      const char* b = reinterpret_cast<const char*>(v.data());
      const size_t n = v.size() * 4, a = n / 3, c = 2 * n / 3;
      st = (*w)->PutParts(state, k, {{b, a}, {b + a, c - a}, {b + c, n - c}});
    }
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  proto::CheckpointMetadata fragment;
  auto bytes = (*w)->Finish(&fragment);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(fragment.files_size(), 1);
  auto text = ReadFile(JoinPath(tmp, RankFileName(rank)));
  EXPECT_TRUE(text.ok());
  return text.ok() ? *text : "";
}

TEST_F(DirectWrites, StagedFilesEqualBufferedOnesInAndOutOfOrder) {
  const Layout lay = L(2, 1, 1, 1, 1, 0);
  for (int rank = 0; rank < lay.world(); ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const size_t slots = PlanRank(kModel, lay, rank).writes.size() * kNumStates;
    std::vector<size_t> in_order(slots);
    std::iota(in_order.begin(), in_order.end(), 0);
    std::vector<size_t> shuffled = in_order;
    std::shuffle(shuffled.begin() + static_cast<long>(slots / 2), shuffled.end(),
                 std::mt19937(7));  // in order, then out of order: staging ends halfway
    const std::string plain = WriteFile(dir_ + "/plain", lay, rank, in_order, nullptr);
    ASSERT_GT(plain.size(), 3 * 8192u);  // several buffers' worth
    // Two 8 KiB buffers for one file: every Put waits for a buffer at least once.
    DirectWritePool pool(8192, 2, 2);
    EXPECT_EQ(WriteFile(dir_ + "/staged", lay, rank, in_order, &pool), plain);
    EXPECT_EQ(WriteFile(dir_ + "/mixed", lay, rank, shuffled, &pool), plain);
    // Where the file system takes O_DIRECT (ext4 here), the staged writes went through it: the
    // comparisons above then compare two different paths, not buffered output with itself.
    const int probe = ::open((dir_ + "/probe").c_str(), O_WRONLY | O_CREAT | O_DIRECT, 0644);
    if (probe >= 0) {
      ::close(probe);
      EXPECT_GT(pool.direct_bytes(), 0u);
    } else {
      std::printf("note: %s refuses O_DIRECT; only the buffered fallback was compared\n",
                  dir_.c_str());
    }
    // Every buffer is back in the pool.
    char* a = pool.TryAcquire();
    char* b = pool.TryAcquire();
    EXPECT_NE(a, nullptr);
    EXPECT_NE(b, nullptr);
    EXPECT_EQ(pool.TryAcquire(), nullptr);
  }
}

TEST_F(DirectWrites, PoolWritesAlignedBuffersAtTheirOffsets) {
  const std::string path = dir_ + "/f";
  DirectWritePool::File f;
  f.path = path;
  f.buffered_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  f.direct_fd = ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  ASSERT_GE(f.buffered_fd, 0);
  if (f.direct_fd < 0) f.direct_fd = f.buffered_fd;  // a file system without O_DIRECT
  DirectWritePool pool(4096, 3, 2);
  // Blocks 7, 6, ..., 0, each filled with its number: written out of order by two threads.
  for (int b = 7; b >= 0; --b) {
    char* buf = pool.Acquire();
    std::memset(buf, 'a' + b, 4096);
    pool.Write(&f, buf, 4096, static_cast<uint64_t>(b) * 4096);
  }
  ASSERT_TRUE(pool.Wait(&f).ok());
  if (f.direct_fd != f.buffered_fd) ::close(f.direct_fd);
  ::close(f.buffered_fd);
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  ASSERT_EQ(text->size(), 8u * 4096);
  for (size_t i = 0; i < text->size(); ++i) {
    ASSERT_EQ((*text)[i], static_cast<char>('a' + i / 4096)) << "byte " << i;
  }
}

TEST_F(DirectWrites, FailedWriteNamesTheFileAndReturnsItsBuffers) {
  DirectWritePool::File f;
  f.path = dir_ + "/never-opened.safetensors";
  f.direct_fd = f.buffered_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY);  // not writable
  ASSERT_GE(f.direct_fd, 0);
  DirectWritePool pool(4096, 2, 1);
  for (int i = 0; i < 4; ++i) pool.Write(&f, pool.Acquire(), 4096, static_cast<uint64_t>(i) * 4096);
  Status st = pool.Wait(&f);
  ::close(f.direct_fd);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("never-opened.safetensors"), std::string::npos) << st.ToString();
  EXPECT_NE(pool.TryAcquire(), nullptr);
  EXPECT_NE(pool.TryAcquire(), nullptr);
}

}  // namespace
}  // namespace loom
