// KeepIfAbandoned: local buffers handed to communication survive their scope only when the
// communication was abandoned (a timed-out operation may still write into them).
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "comm/communicator.h"

namespace loom {
namespace {

// A communicator whose only behaviour is Abandoned(): the guard asks nothing else.
class AbandonFlagComm : public Communicator {
 public:
  bool abandoned = false;
  bool Abandoned() const override { return abandoned; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }
  const std::vector<int>& members() const override { return members_; }
  HandlePtr AllReduceAsync(float*, int64_t, ReduceOp) override { return nullptr; }
  HandlePtr ReduceScatterAsync(const float*, float*, int64_t) override { return nullptr; }
  HandlePtr AllGatherAsync(const float*, float*, int64_t) override { return nullptr; }
  HandlePtr BroadcastAsync(float*, int64_t, int) override { return nullptr; }
  HandlePtr SendAsync(const float*, int64_t, int, int) override { return nullptr; }
  HandlePtr RecvAsync(float*, int64_t, int, int) override { return nullptr; }
  HandlePtr BarrierAsync() override { return nullptr; }

 private:
  std::string name_ = "test";
  std::vector<int> members_{0};
};

TEST(KeepIfAbandoned, LeavesBuffersAloneWhileCommunicationIsHealthy) {
  AbandonFlagComm comm;
  std::vector<float> buf(16, 1.0f);
  const float* data = buf.data();
  {
    KeepIfAbandoned keep(&comm);
    keep(buf);
  }
  EXPECT_EQ(buf.size(), 16u);
  EXPECT_EQ(buf.data(), data);
}

TEST(KeepIfAbandoned, KeepsTheStorageOfEveryGuardedBufferAfterAnAbandonment) {
  AbandonFlagComm comm;
  std::vector<float> buf(16, 2.0f);
  std::map<int, std::vector<float>> slots;
  slots[3].assign(8, 3.0f);
  const float* data = buf.data();
  const float* slot = slots[3].data();
  {
    KeepIfAbandoned keep(&comm);
    keep(buf);
    keep(slots);
    comm.abandoned = true;  // a wait timed out inside the scope
  }
  // The storage moved to objects that are never freed: the caller's containers are empty and
  // the old addresses still hold the data a late operation may write to.
  EXPECT_TRUE(buf.empty());
  EXPECT_TRUE(slots.empty());
  EXPECT_EQ(data[15], 2.0f);
  EXPECT_EQ(slot[7], 3.0f);
}

TEST(KeepIfAbandoned, NullCommunicatorKeepsNothing) {
  std::vector<float> buf(4, 1.0f);
  {
    KeepIfAbandoned keep(nullptr);
    keep(buf);
  }
  EXPECT_EQ(buf.size(), 4u);
}

}  // namespace
}  // namespace loom
