// KeepIfAbandoned: local buffers handed to communication survive their scope only when the
// communication was abandoned (a timed-out operation may still write into them).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "comm/local/local_backend.h"

namespace loom {
namespace {

// Rank 0 of a local world of two whose rank 1 never joins: Abandon() makes a wait pass its
// deadline, which abandons communication (Communicator::Abandoned) as a hung peer would.
class AbandonableComm {
 public:
  AbandonableComm() {
    auto world = CreateLocalWorld(2);
    EXPECT_TRUE(world.ok()) << world.status().ToString();
    auto comm = (*world)[0]->World();
    EXPECT_TRUE(comm.ok()) << comm.status().ToString();
    comm_ = *comm;
  }
  const Communicator* get() const { return comm_.get(); }
  void Abandon() {
    float x = 1.0f;
    const Status st = comm_->AllReduce(CommBuffer::Host(&x, 1), ReduceOp::kSum,
                                       {.deadline = Clock::now() + std::chrono::milliseconds(20)});
    EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  }

 private:
  std::shared_ptr<Communicator> comm_;
};

TEST(KeepIfAbandoned, LeavesBuffersAloneWhileCommunicationIsHealthy) {
  AbandonableComm comm;
  std::vector<float> buf(16, 1.0f);
  const float* data = buf.data();
  {
    KeepIfAbandoned keep(comm.get());
    keep(buf);
  }
  EXPECT_EQ(buf.size(), 16u);
  EXPECT_EQ(buf.data(), data);
}

TEST(KeepIfAbandoned, KeepsTheStorageOfEveryGuardedBufferAfterAnAbandonment) {
  AbandonableComm comm;
  std::vector<float> buf(16, 2.0f);
  std::map<int, std::vector<float>> slots;
  slots[3].assign(8, 3.0f);
  const float* data = buf.data();
  const float* slot = slots[3].data();
  {
    KeepIfAbandoned keep(comm.get());
    keep(buf);
    keep(slots);
    comm.Abandon();  // a wait timed out inside the scope
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
