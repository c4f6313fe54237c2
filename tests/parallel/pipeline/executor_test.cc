// The pipeline executor over a fake stage, under mpirun with 4 ranks (pp = 4): for GPipe, 1F1B and
// interleaved 1F1B every (micro-batch, chunk) is forwarded, backpropagated and released exactly
// once, in that order; activations and gradients arrive where and with what the fake computes; the
// tied embedding reaches the head and the head's gradient reaches the owner before the embedding
// chunk's last backward; forward-only evaluation runs every micro-batch through every chunk.
#include "parallel/pipeline/executor.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "tests/mpi_test_main.h"

namespace loom {
namespace {

constexpr int64_t kWidth = 3;        // floats per activation
constexpr int64_t kEmbedding = 2;    // floats of the tied embedding
constexpr float kHeadWeight = 2.0f;  // the owner's embedding value (the head's loss weight)

// Global chunk g adds g + 1 to its input; chunk 0's input is micro + 1; the head's loss is
// kHeadWeight * sum(output), so every gradient flowing back is kHeadWeight.
class FakeStage : public PipelineStage {
 public:
  FakeStage(const Schedule& s, int rank) : s_(s), rank_(rank) {
    if (rank == 0) owned_.assign(kEmbedding, kHeadWeight);
    if (rank == s.pp - 1) {
      head_.assign(kEmbedding, 0.0f);
      head_grads_.assign(kEmbedding, 7.0f);  // garbage: the executor zeroes it
    }
    owned_grads_.assign(kEmbedding, 0.0f);
  }

  int64_t ActivationFloats() const override { return kWidth; }
  Result<double> Forward(int micro, int chunk, const float* input) override {
    const int g = Global(chunk);
    Slot& slot = slots_[{micro, chunk}];
    if (slot.forwarded) return Internal("forwarded twice");
    slot.forwarded = true;
    const float expect = Expected(micro, g);
    for (int64_t i = 0; i < kWidth; ++i) {
      const float x = g == 0 ? micro + 1.0f : input[i];
      if (x != expect) return Internal("wrong input");
      slot.out[i] = x + g + 1;
    }
    if (g != s_.num_chunks() - 1) return 0.0;
    if (head_[0] != kHeadWeight) return Internal("head without the owner's embedding");
    return head_[0] * kWidth * slot.out[0];
  }
  const float* Output(int micro, int chunk) const override { return slots_.at({micro, chunk}).out; }
  Status Backward(int micro, int chunk, const float* dout, bool last) override {
    const int g = Global(chunk);
    Slot& slot = slots_[{micro, chunk}];
    if (!slot.forwarded || slot.backwarded) return Internal("backward out of order");
    slot.backwarded = true;
    if (last != (micro == s_.micro - 1)) return Internal("wrong last flag");
    const bool head = g == s_.num_chunks() - 1;
    for (int64_t i = 0; i < kWidth; ++i) {
      if (!head && dout[i] != kHeadWeight) return Internal("wrong output gradient");
      dx_[chunk][i] = head ? kHeadWeight : dout[i];
    }
    if (head) head_grads_[0] += 1.0f;
    // The head's gradient of the embedding arrives before the embedding chunk's last backward.
    if (g == 0 && last && owned_grads_[0] != static_cast<float>(s_.micro)) {
      return Internal("embedding gradient missing the head's part");
    }
    return Status::Ok();
  }
  const float* InputGradient(int chunk) const override { return dx_[chunk]; }
  void Release(int micro, int chunk) override { ++slots_[{micro, chunk}].released; }
  int64_t EmbeddingFloats() const override { return kEmbedding; }
  Result<const float*> EmbeddingWeights() override {
    return owned_.empty() ? nullptr : owned_.data();
  }
  float* EmbeddingGrads() override { return owned_grads_.data(); }
  float* HeadEmbedding() override { return head_.empty() ? nullptr : head_.data(); }
  float* HeadEmbeddingGrads() override {
    return head_grads_.empty() ? nullptr : head_grads_.data();
  }

  struct Slot {
    bool forwarded = false, backwarded = false;
    int released = 0;
    float out[kWidth] = {};
  };
  std::map<std::pair<int, int>, Slot> slots_;

 private:
  int Global(int chunk) const { return s_.GlobalChunk(rank_, chunk); }
  static float Expected(int micro, int g) { return micro + 1.0f + g * (g + 1) / 2.0f; }

  const Schedule& s_;
  int rank_;
  std::vector<float> owned_, owned_grads_, head_, head_grads_;
  float dx_[4][kWidth] = {};
};

// Loss of the whole pipeline over `micro` micro-batches: sum of the head's kHeadWeight * output.
double ExpectedLoss(int micro, int chunks) {
  double total = 0;
  for (int m = 0; m < micro; ++m)
    total += kHeadWeight * kWidth * (m + 1.0 + chunks * (chunks + 1) / 2.0);
  return total;
}

class Executor : public ::testing::TestWithParam<std::pair<ScheduleKind, int>> {};

TEST_P(Executor, RunsEveryMicroBatchThroughEveryChunkOnce) {
  auto world = testing::Mpi().World();
  ASSERT_TRUE(world.ok());
  Communicator& pp = **world;
  const auto [kind, vpp] = GetParam();
  const int micro = 8;
  auto schedule = MakeSchedule(kind, pp.size(), vpp, micro);
  ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
  auto executor = PipelineExecutor::Create(&pp, &*schedule);
  ASSERT_TRUE(executor.ok()) << executor.status().ToString();
  FakeStage stage(*schedule, pp.rank());
  PipelineTimings timings;
  auto loss = (*executor)->RunStep(stage, &timings);
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  EXPECT_EQ(timings.forwards, micro * vpp);
  EXPECT_EQ(timings.backwards, micro * vpp);
  EXPECT_EQ(stage.slots_.size(), static_cast<size_t>(micro * vpp));
  for (const auto& [id, slot] : stage.slots_) {
    EXPECT_TRUE(slot.forwarded && slot.backwarded) << id.first << "," << id.second;
    EXPECT_EQ(slot.released, 1) << id.first << "," << id.second;
  }
  float total = static_cast<float>(*loss);
  ASSERT_TRUE(pp.AllReduce(&total, 1).ok());
  EXPECT_FLOAT_EQ(total, ExpectedLoss(micro, schedule->num_chunks()));
}

TEST_P(Executor, EvaluatesForwardOnly) {
  auto world = testing::Mpi().World();
  ASSERT_TRUE(world.ok());
  Communicator& pp = **world;
  const auto [kind, vpp] = GetParam();
  auto schedule = MakeSchedule(kind, pp.size(), vpp, 4);
  ASSERT_TRUE(schedule.ok());
  auto executor = PipelineExecutor::Create(&pp, &*schedule);
  ASSERT_TRUE(executor.ok());
  FakeStage stage(*schedule, pp.rank());
  std::vector<int64_t> loaded;
  auto loss = (*executor)->Evaluate(stage, 3, [&](int64_t e) {
    loaded.push_back(e);
    return Status::Ok();
  });
  ASSERT_TRUE(loss.ok()) << loss.status().ToString();
  EXPECT_EQ(loaded, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(stage.slots_.size(), static_cast<size_t>(3 * vpp));
  for (const auto& [id, slot] : stage.slots_) {
    EXPECT_TRUE(slot.forwarded && !slot.backwarded);
    EXPECT_EQ(slot.released, 1);
  }
  float total = static_cast<float>(*loss);
  ASSERT_TRUE(pp.AllReduce(&total, 1).ok());
  EXPECT_FLOAT_EQ(total, ExpectedLoss(3, schedule->num_chunks()));
}

INSTANTIATE_TEST_SUITE_P(Schedules, Executor,
                         ::testing::Values(std::pair{ScheduleKind::kGPipe, 1},
                                           std::pair{ScheduleKind::k1F1B, 1},
                                           std::pair{ScheduleKind::kInterleaved, 2}));

TEST(PipelineExecutor, RefusesAScheduleForAnotherGroup) {
  auto world = testing::Mpi().World();
  ASSERT_TRUE(world.ok());
  auto schedule = MakeSchedule(ScheduleKind::k1F1B, (*world)->size() + 1, 1, 4);
  ASSERT_TRUE(schedule.ok());
  EXPECT_FALSE(PipelineExecutor::Create(world->get(), &*schedule).ok());
}

}  // namespace
}  // namespace loom
