// The save engine (checkpoint/save_engine.h) in one process, with a sink in memory that records
// the phases it is called for — as #23's shared-memory and erasure-coded sinks will plug in —
// and with the universal checkpoint file sink end to end: what the image holds, the copy
// complete before the optimizer update while the store goes on, a failed store, replication or
// commit failing the save, a failed save's part discarded, saves committed in order.
#include "checkpoint/save_engine.h"

#include <gtest/gtest.h>

#include <array>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "checkpoint/file_sink.h"
#include "checkpoint/format.h"
#include "checkpoint/metadata_specs.h"
#include "checkpoint/reader.h"
#include "model/config.h"
#include "tests/checkpoint/temp_dir_test.h"

namespace loom {
namespace {

ModelConfig TinyModel() {
  ModelConfig m;
  m.vocab = 32;
  m.max_seq = 8;
  m.layers = 2;
  m.heads = 2;
  m.hidden = 8;
  return m;
}

// One rank's state in plain vectors: element i of state s is base + 100000 s + i.
class FakeState : public RankState {
 public:
  explicit FakeState(const ParamLayout& params) : params_(params) {
    for (auto& v : data_) v.resize(static_cast<size_t>(params.total));
    Set(0.0f);
  }
  void Set(float base) {
    for (int s = 0; s < kNumStates; ++s) {
      for (size_t i = 0; i < data_[s].size(); ++i) {
        data_[s][i] = base + 100000.0f * static_cast<float>(s) + static_cast<float>(i);
      }
    }
  }
  // What the image must hold: each state of each piece, in order.
  std::vector<float> Image(const RankShardPlan& plan) const {
    std::vector<float> out;
    for (int s = 0; s < kNumStates; ++s) {
      for (const Piece& p : plan.writes) {
        const float* at = data_[s].data() + p.local;
        out.insert(out.end(), at, at + p.region.size());
      }
    }
    return out;
  }
  float* StateData(StateKind state, int bucket, int64_t* lo, int64_t* hi) override {
    *lo = 0;
    *hi = params_.buckets[bucket].second - params_.buckets[bucket].first;
    return data_[static_cast<int>(state)].data() + params_.buckets[bucket].first;
  }
  Status Quiesce() override { return Status::Ok(); }
  void StateLoaded() override {}
  int64_t optimizer_steps() const override { return 0; }
  void set_optimizer_steps(int64_t) override {}

 private:
  const ParamLayout& params_;
  std::array<std::vector<float>, kNumStates> data_;
};

// A sink in memory that logs its phases; Store can be held after the copy (a slow store), and
// any phase can fail.
class MemorySink : public SaveSink {
 public:
  explicit MemorySink(uint64_t bytes) : bytes_(bytes), image_(bytes / sizeof(float)) {}

  bool fail_store = false, fail_replicate = false, fail_commit = false;

  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_ = false;
    }
    cv_.notify_all();
  }
  std::vector<std::string> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  std::vector<float> stored() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stored_;
  }

  Status CanSave() const override { return Status::Ok(); }
  Result<char*> Begin(const proto::CheckpointMetadata& meta) override {
    step_ = meta.step();
    Log("begin");
    return reinterpret_cast<char*>(image_.data());
  }
  Status Store(const FillImage& fill) override {
    Log("store");
    LOOM_RETURN_IF_ERROR(fill(bytes_ / 2));  // in two parts, as a file is streamed
    LOOM_RETURN_IF_ERROR(fill(bytes_));
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !held_; });
    stored_ = image_;
    if (fail_store) return IoError("memory part of step " + std::to_string(step_) + ": full");
    return Status::Ok();
  }
  Result<uint64_t> Seal() override {
    Log("seal");
    return bytes_;
  }
  Status Replicate() override {
    Log("replicate");
    if (fail_replicate) return DeadlineExceeded("fragment 3 was not acknowledged");
    return Status::Ok();
  }
  bool CommitsHere() const override { return true; }
  Status Commit(const proto::CheckpointMetadata& meta) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back("commit " + std::to_string(meta.step()));
    if (fail_commit) return IoError("the manifest could not be written");
    return Status::Ok();
  }
  void Discard(int64_t step) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back("discard " + std::to_string(step));
  }
  std::string PartName(int64_t step) const override {
    return "memory part of step " + std::to_string(step);
  }
  std::string CommitName() const override { return "snapshots in memory"; }

 private:
  void Log(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(what + " " + std::to_string(step_));
  }
  const uint64_t bytes_;
  std::vector<float> image_;
  int64_t step_ = -1;  // writer thread
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;                // GUARDED_BY(mu_)
  std::vector<float> stored_;        // GUARDED_BY(mu_)
  std::vector<std::string> events_;  // GUARDED_BY(mu_)
};

proto::CheckpointMetadata Meta(int64_t step) {
  proto::CheckpointMetadata m;
  m.set_step(step);
  SetModelSpec(TinyModel(), m.mutable_model());
  SetLayoutSpec(Layout{}, m.mutable_saved_layout());
  m.mutable_optimizer()->set_name("adamw");
  return m;
}

class SaveEngineTest : public TempDirTest {
 protected:
  SaveEngineTest()
      : plan_(PlanRank(TinyModel(), Layout{}, 0)), state_(plan_.layout), sink_(ImageBytes(plan_)) {}
  std::unique_ptr<SaveEngine> Engine(SaveSink* sink, bool async = true) {
    SaveEngineOptions o;
    o.async = async;
    return std::make_unique<SaveEngine>(plan_, plan_.layout, &state_, sink, o);
  }
  const RankShardPlan plan_;
  FakeState state_;
  MemorySink sink_;
};

TEST_F(SaveEngineTest, ImageHoldsEveryStateOfEveryPieceInOrder) {
  ASSERT_EQ(ImageBytes(plan_), state_.Image(plan_).size() * sizeof(float));
  auto engine = Engine(&sink_);
  ASSERT_TRUE(engine->Save(2, [&] { return Meta(2); }).ok());
  ASSERT_TRUE(engine->Finish().ok());
  EXPECT_EQ(sink_.stored(), state_.Image(plan_));
  EXPECT_EQ(sink_.events(),
            (std::vector<std::string>{"begin 2", "store 2", "seal 2", "replicate 2", "commit 2"}));
  EXPECT_EQ(engine->stats().saves, 1);
  EXPECT_EQ(engine->stats().bytes, ImageBytes(plan_));
}

TEST_F(SaveEngineTest, TheUpdateWaitsForTheCopyNotForTheStore) {
  const std::vector<float> before = state_.Image(plan_);
  auto engine = Engine(&sink_);
  sink_.Hold();  // the store goes on after the copy until released
  ASSERT_TRUE(engine->Save(2, [&] { return Meta(2); }).ok());
  ASSERT_TRUE(engine->BeforeUpdate().ok());  // the copy is complete
  state_.Set(7.0f);                          // the optimizer update
  ASSERT_TRUE(engine->Poll().ok());          // still storing: nothing committed
  for (const std::string& e : sink_.events()) EXPECT_NE(e.rfind("commit", 0), 0u) << e;
  sink_.Release();
  ASSERT_TRUE(engine->Finish().ok());
  EXPECT_EQ(sink_.stored(), before);
  EXPECT_EQ(sink_.events().back(), "commit 2");
}

TEST_F(SaveEngineTest, SavesCommitInOrderOneInFlight) {
  auto engine = Engine(&sink_);
  for (int64_t step : {2, 4, 6}) ASSERT_TRUE(engine->Save(step, [&] { return Meta(step); }).ok());
  ASSERT_TRUE(engine->Finish().ok());
  std::vector<std::string> commits, writes;
  for (const std::string& e : sink_.events()) {
    (e.rfind("commit", 0) == 0 ? commits : writes).push_back(e);
  }
  EXPECT_EQ(commits, (std::vector<std::string>{"commit 2", "commit 4", "commit 6"}));
  // A save starts once the previous one is stored and replicated.
  EXPECT_EQ(writes, (std::vector<std::string>{"begin 2", "store 2", "seal 2", "replicate 2",
                                              "begin 4", "store 4", "seal 4", "replicate 4",
                                              "begin 6", "store 6", "seal 6", "replicate 6"}));
}

TEST_F(SaveEngineTest, AFailedStoreFailsTheSaveAndItsPartIsDiscarded) {
  sink_.fail_store = true;
  auto engine = Engine(&sink_);
  ASSERT_TRUE(engine->Save(4, [&] { return Meta(4); }).ok());
  ASSERT_TRUE(engine->BeforeUpdate().ok());                      // never blocked by a failed save
  const Status next = engine->Save(6, [&] { return Meta(6); });  // waits for step 4, which failed
  ASSERT_FALSE(next.ok());
  EXPECT_NE(next.message().find("checkpoint step 4: memory part of step 4: full"),
            std::string::npos)
      << next.message();
  engine.reset();
  EXPECT_EQ(sink_.events(),
            (std::vector<std::string>{"begin 4", "store 4", "discard 4"}));  // no commit
}

TEST_F(SaveEngineTest, AReplicationThatIsNotAcknowledgedFailsTheSave) {
  sink_.fail_replicate = true;
  auto engine = Engine(&sink_);
  ASSERT_TRUE(engine->Save(2, [&] { return Meta(2); }).ok());
  const Status st = engine->Finish();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("checkpoint step 2: fragment 3 was not acknowledged"),
            std::string::npos)
      << st.message();
  engine.reset();
  EXPECT_EQ(sink_.events(),
            (std::vector<std::string>{"begin 2", "store 2", "seal 2", "replicate 2", "discard 2"}));
}

TEST_F(SaveEngineTest, AFailedCommitIsReportedByFinish) {
  sink_.fail_commit = true;
  auto engine = Engine(&sink_, /*async=*/false);
  ASSERT_TRUE(engine->Save(2, [&] { return Meta(2); })
                  .ok());  // synchronous: voted complete, commit started
  const Status st = engine->Finish();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("checkpoint commit: the manifest could not be written"),
            std::string::npos)
      << st.message();
}

TEST_F(SaveEngineTest, TheFileSinkWritesTheImageAsAUniversalCheckpoint) {
  FileSinkOptions o;
  o.root = dir_;
  o.model = TinyModel();
  o.keep = 2;
  FileSink files(o, plan_);
  auto engine = Engine(&files);
  for (int64_t step : {1, 2, 3}) {
    state_.Set(static_cast<float>(step));
    ASSERT_TRUE(engine->Save(step, [&] { return Meta(step); }).ok());
    ASSERT_TRUE(engine->BeforeUpdate().ok());
    ASSERT_TRUE(engine->Poll().ok());
  }
  ASSERT_TRUE(engine->Finish().ok());
  const auto list = ListCheckpoints(dir_);  // retention: the newest 2
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].first, 3);
  EXPECT_EQ(ReadLatest(dir_), StepDirName(3));
  Result<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(list[0].second);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  std::vector<float> read;
  for (int s = 0; s < kNumStates; ++s) {
    for (const Piece& p : plan_.writes) {
      std::vector<float> piece(static_cast<size_t>(p.region.size()));
      const std::string& name = plan_.layout.params[static_cast<size_t>(p.param)].name;
      ASSERT_TRUE((*reader)->Read(name, static_cast<StateKind>(s), p.region, piece.data()).ok());
      read.insert(read.end(), piece.begin(), piece.end());
    }
  }
  EXPECT_EQ(read, state_.Image(plan_));
}

}  // namespace
}  // namespace loom
