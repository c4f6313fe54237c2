// Bulk transfers into peers' windows, over both transports (UCX where built, and the
// communicator), with ranks as threads of this process (comm/local): bytes land at the offset
// named, notes arrive with them, rounds may follow each other at once, and a peer that never
// sends is named at the deadline.
#include "comm/bulk_transport.h"

#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "comm/local/local_backend.h"

namespace loom {
namespace {

constexpr int kRanks = 4;
constexpr uint64_t kWindow = 2 << 20;

// Runs fn(rank, world communicator) on one thread per rank.
template <typename Fn>
void OnRanks(Fn fn) {
  auto world = CreateLocalWorld(kRanks);
  ASSERT_TRUE(world.ok());
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      auto comm = (*world)[r]->World();
      ASSERT_TRUE(comm.ok());
      fn(r, comm->get());
    });
  }
  for (std::thread& t : threads) t.join();
}

class BulkTransportTest : public ::testing::TestWithParam<BulkKind> {
 protected:
  void SetUp() override {
    if (GetParam() == BulkKind::kUcx && !UcxBuilt()) GTEST_SKIP() << "this build has no UCX";
  }
};

TEST_P(BulkTransportTest, BytesLandInPlaceWithTheirNotes) {
  OnRanks([](int r, Communicator* comm) {
    std::vector<char> w0(kWindow, 0), w1(kWindow, 0);
    Result<std::unique_ptr<BulkTransport>> t =
        CreateBulkTransport(GetParam(), comm, {{w0.data(), kWindow}, {w1.data(), kWindow}});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_STREQ((*t)->name(), GetParam() == BulkKind::kUcx ? "ucx" : "comm");
    std::vector<char> src(300000);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 13 + r);
    for (uint64_t round = 0; round < 6; ++round) {  // back to back, windows alternating
      const int to = (r + 1 + static_cast<int>(round)) % kRanks;
      const int from = (r + kRanks - 1 - static_cast<int>(round) % kRanks) % kRanks;
      const int window = static_cast<int>(round % 2);
      const uint64_t bytes = 1000 + round * 50000;
      // A sender may be two rounds ahead of its receiver: every round has its own place.
      const uint64_t at = 4096 + round * 300001;
      std::vector<BulkSend> sends{{to, window, at, src.data(), bytes,
                                   "note " + std::to_string(r) + "/" + std::to_string(round)}};
      std::vector<BulkRecv> recvs{{from, window, at, bytes, ""}};
      Status st = (*t)->Exchange(round, sends, &recvs, Clock::now() + std::chrono::seconds(20));
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(recvs[0].note, "note " + std::to_string(from) + "/" + std::to_string(round));
      const char* got = (window == 0 ? w0 : w1).data() + at;
      for (uint64_t i = 0; i < bytes; i += 997) {
        ASSERT_EQ(got[i], static_cast<char>(i * 13 + from)) << "round " << round << " byte " << i;
      }
      ASSERT_EQ(got[bytes - 1], static_cast<char>((bytes - 1) * 13 + from));
    }
    // Every rank is done with every round before any window goes away.
    ASSERT_TRUE(comm->Barrier().ok());
  });
}

TEST_P(BulkTransportTest, APeerThatNeverSendsIsNamed) {
  OnRanks([](int r, Communicator* comm) {
    std::vector<char> w(kWindow, 0);
    Result<std::unique_ptr<BulkTransport>> t =
        CreateBulkTransport(GetParam(), comm, {{w.data(), kWindow}});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    if (r != 0) return;  // rank 0 waits for rank 2, which sends nothing
    std::vector<BulkRecv> recvs{{2, 0, 0, 100, ""}};
    Status st = (*t)->Exchange(0, {}, &recvs, Clock::now() + std::chrono::milliseconds(300));
    ASSERT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
    EXPECT_NE(st.message().find("rank 2"), std::string::npos) << st.message();
  });
}

INSTANTIATE_TEST_SUITE_P(Kinds, BulkTransportTest,
                         ::testing::Values(BulkKind::kUcx, BulkKind::kComm), [](const auto& info) {
                           return std::string(info.param == BulkKind::kUcx ? "Ucx" : "Comm");
                         });

}  // namespace
}  // namespace loom
