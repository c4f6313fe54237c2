// Communicator semantics over real MPI processes (run under mpirun with 4 ranks): every
// collective against its definition, sub-groups from the layout, asynchronous operations waited
// out of order, point-to-point rings, and the trace.
#include <gtest/gtest.h>

#include <numeric>

#include "comm/backend.h"
#include "core/half.h"
#include "parallel/layout.h"
#include "tests/mpi_test_main.h"

namespace loom {
namespace {

std::shared_ptr<Communicator> World() {
  auto w = testing::Mpi().World();
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return std::move(*w);
}

TEST(MpiCommunicator, AllReduceSumAndMax) {
  auto w = World();
  const int n = w->size(), r = w->rank();
  std::vector<float> v(1000);
  for (int i = 0; i < 1000; ++i) v[i] = static_cast<float>(r * 1000 + i);
  ASSERT_TRUE(w->AllReduce(v.data(), 1000).ok());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(v[i], 1000.f * n * (n - 1) / 2 + float(n) * i);
  float m = static_cast<float>(r);
  ASSERT_TRUE(w->AllReduce(&m, 1, ReduceOp::kMax).ok());
  EXPECT_EQ(m, n - 1);
}

TEST(MpiCommunicator, ReduceScatterAllGatherBroadcast) {
  auto w = World();
  const int n = w->size(), r = w->rank(), chunk = 5;
  std::vector<float> in(n * chunk), out(chunk);
  for (int i = 0; i < n * chunk; ++i) in[i] = static_cast<float>(i + 100 * r);
  ASSERT_TRUE(w->ReduceScatter(in.data(), out.data(), chunk).ok());
  for (int i = 0; i < chunk; ++i)
    EXPECT_EQ(out[i], float(n * (r * chunk + i)) + 100.f * n * (n - 1) / 2);
  std::vector<float> mine(chunk, float(r)), all(n * chunk);
  ASSERT_TRUE(w->AllGather(mine.data(), all.data(), chunk).ok());
  for (int i = 0; i < n * chunk; ++i) EXPECT_EQ(all[i], float(i / chunk));
  std::vector<float> b(3, r == 2 ? 7.f : 0.f);
  ASSERT_TRUE(w->Broadcast(b.data(), 3, 2).ok());
  EXPECT_EQ(b, std::vector<float>(3, 7.f));
  EXPECT_TRUE(w->Barrier().ok());
}

TEST(MpiCommunicator, AsyncOperationsOverlapAndCompleteOutOfOrder) {
  auto w = World();
  std::vector<std::vector<float>> bufs(6, std::vector<float>(1 << 16, 1.f));
  std::vector<HandlePtr> hs;
  for (auto& b : bufs)
    hs.push_back(w->AllReduceAsync(b.data(), static_cast<int64_t>(b.size()), ReduceOp::kSum));
  for (size_t i = hs.size(); i-- > 0;) ASSERT_TRUE(hs[i]->Wait(w->DefaultDeadline()).ok());
  for (auto& b : bufs) ASSERT_EQ(b[12345], float(w->size()));
}

TEST(MpiCommunicator, SendRecvRing) {
  auto w = World();
  const int n = w->size(), r = w->rank();
  std::vector<float> out(10, float(r)), in(10, -1.f);
  auto recv = w->RecvAsync(in.data(), 10, (r + n - 1) % n, 3);
  auto send = w->SendAsync(out.data(), 10, (r + 1) % n, 3);
  ASSERT_TRUE(send->Wait(w->DefaultDeadline()).ok());
  ASSERT_TRUE(recv->Wait(w->DefaultDeadline()).ok());
  EXPECT_EQ(in, std::vector<float>(10, float((r + n - 1) % n)));
}

// Every rank receives first, both ways around the ring, in one exchange; the messages are above
// the shared-memory transport's eager limit, so each must wait for its receiver.
TEST(MpiCommunicator, ExchangeAroundTheRingBothWays) {
  auto w = World();
  const int n = w->size(), r = w->rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
  const int64_t len = 1 << 18;
  std::vector<float> fwd(len, float(r)), bwd(len, float(10 * r)), from_prev(len), from_next(len);
  std::vector<HandlePtr> hs =
      w->ExchangeAsync({P2PCall::Recv(CommBuffer::Host(from_prev.data(), len), prev, 3),
                        P2PCall::Recv(CommBuffer::Host(from_next.data(), len), next, 4),
                        P2PCall::Send(ConstCommBuffer::Host(fwd.data(), len), next, 3),
                        P2PCall::Send(ConstCommBuffer::Host(bwd.data(), len), prev, 4)});
  for (const HandlePtr& h : hs) ASSERT_TRUE(h->Wait(w->DefaultDeadline()).ok());
  EXPECT_EQ(from_prev, std::vector<float>(len, float(prev)));
  EXPECT_EQ(from_next, std::vector<float>(len, float(10 * next)));
}

TEST(MpiCommunicator, LayoutGroups) {
  ASSERT_EQ(testing::Mpi().world_size(), 4);
  Layout l{.tp = 2, .dp = 2};
  const int r = testing::Mpi().world_rank();
  auto tp = testing::Mpi().CreateGroup("tp", l.GroupOf(GroupKind::kTensor, r));
  auto dp = testing::Mpi().CreateGroup("dp", l.GroupOf(GroupKind::kData, r));
  ASSERT_TRUE(tp.ok() && dp.ok());
  EXPECT_EQ((*tp)->rank(), l.CoordOf(r).tp);
  EXPECT_EQ((*dp)->rank(), l.CoordOf(r).dp);
  float v = static_cast<float>(r);
  ASSERT_TRUE((*tp)->AllReduce(&v, 1).ok());
  EXPECT_EQ(v, r < 2 ? 1.f : 5.f);  // {0,1} and {2,3}
  v = static_cast<float>(r);
  ASSERT_TRUE((*dp)->AllReduce(&v, 1).ok());
  EXPECT_EQ(v, r % 2 == 0 ? 2.f : 4.f);                                 // {0,2} and {1,3}
  EXPECT_FALSE(testing::Mpi().CreateGroup("bad", {(r + 1) % 4}).ok());  // not a member
}

TEST(MpiCommunicator, TraceRecordsEveryCall) {
  testing::Mpi().trace().Clear();
  auto w = World();
  std::vector<float> v(256, 1.f);
  ASSERT_TRUE(w->AllReduce(v.data(), 256).ok());
  ASSERT_TRUE(w->Barrier().ok());
  auto recs = testing::Mpi().trace().Snapshot();
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].op, CommOp::kAllReduce);
  EXPECT_EQ(recs[0].group, "world");
  EXPECT_EQ(recs[0].seq, 0u);
  EXPECT_EQ(recs[0].bytes, 1024);
  EXPECT_LE(recs[0].enqueue_ns, recs[0].start_ns);
  EXPECT_LE(recs[0].start_ns, recs[0].end_ns);
  EXPECT_EQ(recs[1].op, CommOp::kBarrier);
  EXPECT_EQ(recs[1].seq, 1u);
}

// Typed buffers: each carried dtype all-reduced (bf16 and f16 through this backend's own MPI
// operations), gathered and sent; a device the backend cannot serve is refused by name.
TEST(MpiCommunicator, TypedBuffersOfEveryDtype) {
  auto w = World();
  const int n = w->size(), r = w->rank();
  std::vector<uint16_t> bf(7), h(7);
  std::vector<int32_t> i32(7);
  std::vector<uint8_t> u8(7);
  for (int k = 0; k < 7; ++k) {
    bf[k] = FloatToBf16(static_cast<float>(r + k));
    h[k] = FloatToF16(static_cast<float>(r * k));
    i32[k] = r - k;
    u8[k] = static_cast<uint8_t>(r + 2 * k);
  }
  ASSERT_TRUE(w->AllReduce({bf.data(), 7, DType::kBF16}).ok());
  ASSERT_TRUE(w->AllReduce({h.data(), 7, DType::kF16}, ReduceOp::kMax).ok());
  ASSERT_TRUE(w->AllReduce(CommBuffer::Host(i32.data(), 7)).ok());
  ASSERT_TRUE(w->AllReduce(CommBuffer::Host(u8.data(), 7)).ok());
  for (int k = 0; k < 7; ++k) {
    EXPECT_EQ(Bf16ToFloat(bf[k]), static_cast<float>(n * (n - 1) / 2 + n * k));
    EXPECT_EQ(F16ToFloat(h[k]), static_cast<float>((n - 1) * k));
    EXPECT_EQ(i32[k], n * (n - 1) / 2 - n * k);
    EXPECT_EQ(u8[k], n * (n - 1) / 2 + 2 * n * k);
  }
  std::vector<uint16_t> mine(3, FloatToBf16(static_cast<float>(r))), all(3 * n);
  ASSERT_TRUE(
      w->AllGather(ConstCommBuffer(mine.data(), 3, DType::kBF16), {all.data(), 3 * n, DType::kBF16})
          .ok());
  for (int k = 0; k < 3 * n; ++k) EXPECT_EQ(Bf16ToFloat(all[k]), static_cast<float>(k / 3));
  std::vector<uint8_t> out(5, static_cast<uint8_t>(r)), in(5);
  auto recv = w->RecvAsync(CommBuffer::Host(in.data(), 5), (r + n - 1) % n, {.tag = 11});
  auto send = w->SendAsync(ConstCommBuffer::Host(out.data(), 5), (r + 1) % n, {.tag = 11});
  ASSERT_TRUE(send->Wait().ok() && recv->Wait().ok());
  EXPECT_EQ(in, std::vector<uint8_t>(5, static_cast<uint8_t>((r + n - 1) % n)));
  const Status cuda = w->AllReduce({bf.data(), 7, DType::kBF16, Device::kCuda});
  EXPECT_EQ(cuda.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(cuda.message().find("the mpi backend cannot serve device cuda"), std::string::npos);
  EXPECT_FALSE(w->Abandoned());
}

TEST(TraceRing, KeepsTheNewestRecords) {
  TraceRing ring(3);
  for (uint64_t i = 0; i < 5; ++i) ring.Add({CommOp::kSend, "pp", i});
  auto recs = ring.Snapshot();
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].seq, 2u);
  EXPECT_EQ(recs[2].seq, 4u);
}

}  // namespace
}  // namespace loom
