// The local backend (ranks as threads of this process, no mpirun): every collective and
// point-to-point call against its definition for every dtype communicators carry, parameterised
// over ranks x size; deadlines (a member that never arrives) and the abandonment that follows;
// the front's checks (dtype, device, counts, peer, tag); members that disagree; groups; the
// per-call trace, its cursor and its summaries.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm/backend.h"
#ifdef LOOM_HAVE_NCCL
#include "comm/nccl/nccl_backend.h"
#endif
#include "comm/local/local_backend.h"
#include "core/half.h"
#include "core/tunables.h"

namespace loom {
namespace {

using std::chrono::milliseconds;

// Runs fn(backend) on one thread per rank of a new local world of n ranks.
void OnRanks(int n, const std::function<void(Backend&)>& fn, BackendOptions o = {}) {
  auto world = CreateLocalWorld(n, o);
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { fn(*(*world)[r]); });
  for (std::thread& t : threads) t.join();
}

std::shared_ptr<Communicator> WorldOf(Backend& b) {
  auto w = b.World();
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? *w : nullptr;
}

// Elements of any carried dtype, written and read as float (small integers: exact in all).
struct Elements {
  DType dtype;
  std::vector<std::byte> bytes;
  Elements(DType t, int64_t n) : dtype(t), bytes(static_cast<size_t>(n) * DTypeSize(t)) {}
  CommBuffer buffer() { return {bytes.data(), count(), dtype, Device::kCpu}; }
  int64_t count() const { return static_cast<int64_t>(bytes.size() / DTypeSize(dtype)); }
  void Set(int64_t i, float v) {
    std::byte* p = bytes.data() + static_cast<size_t>(i) * DTypeSize(dtype);
    if (dtype == DType::kF32) *reinterpret_cast<float*>(p) = v;
    if (dtype == DType::kI32) *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(v);
    if (dtype == DType::kU8) *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(v);
    if (dtype == DType::kBF16) *reinterpret_cast<uint16_t*>(p) = FloatToBf16(v);
    if (dtype == DType::kF16) *reinterpret_cast<uint16_t*>(p) = FloatToF16(v);
  }
  float Get(int64_t i) const {
    const std::byte* p = bytes.data() + static_cast<size_t>(i) * DTypeSize(dtype);
    if (dtype == DType::kI32) return static_cast<float>(*reinterpret_cast<const int32_t*>(p));
    if (dtype == DType::kU8) return static_cast<float>(*reinterpret_cast<const uint8_t*>(p));
    if (dtype == DType::kBF16) return Bf16ToFloat(*reinterpret_cast<const uint16_t*>(p));
    if (dtype == DType::kF16) return F16ToFloat(*reinterpret_cast<const uint16_t*>(p));
    return *reinterpret_cast<const float*>(p);
  }
};

// Member r's element i: small integers, so that sums over 8 ranks stay exact in bf16 and u8.
float V(int r, int64_t i) {
  return static_cast<float>((r + 3 * i) % 7);
}

const DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kU8};

class LocalCollectives : public ::testing::TestWithParam<std::tuple<int, int64_t>> {
 protected:
  int ranks() const { return std::get<0>(GetParam()); }
  int64_t n() const { return std::get<1>(GetParam()); }
};

TEST_P(LocalCollectives, AllReduceSumAndMax) {
  const int64_t n = this->n();
  const int size = ranks();
  OnRanks(size, [&](Backend& b) {
    auto w = WorldOf(b);
    const int r = w->rank();
    for (DType t : kDTypes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
        Elements e(t, n);
        for (int64_t i = 0; i < n; ++i) e.Set(i, V(r, i));
        ASSERT_TRUE(w->AllReduce(e.buffer(), op).ok()) << DTypeName(t);
        for (int64_t i = 0; i < n; ++i) {
          float expect = 0;
          for (int m = 0; m < size; ++m) {
            expect = op == ReduceOp::kSum ? expect + V(m, i) : std::max(expect, V(m, i));
          }
          ASSERT_EQ(e.Get(i), expect) << DTypeName(t) << " element " << i;
        }
      }
    }
  });
}

TEST_P(LocalCollectives, ReduceScatterAndAllGather) {
  const int64_t n = this->n();
  const int size = ranks();
  OnRanks(size, [&](Backend& b) {
    auto w = WorldOf(b);
    const int r = w->rank();
    for (DType t : kDTypes) {
      Elements in(t, n * size), out(t, n);
      for (int64_t i = 0; i < n * size; ++i) in.Set(i, V(r, i));
      ASSERT_TRUE(w->ReduceScatter(in.buffer(), out.buffer()).ok()) << DTypeName(t);
      for (int64_t i = 0; i < n; ++i) {
        float expect = 0;
        for (int m = 0; m < size; ++m) expect += V(m, r * n + i);
        ASSERT_EQ(out.Get(i), expect) << DTypeName(t) << " element " << i;
      }
      Elements mine(t, n), all(t, n * size);
      for (int64_t i = 0; i < n; ++i) mine.Set(i, V(r, i));
      ASSERT_TRUE(w->AllGather(mine.buffer(), all.buffer()).ok()) << DTypeName(t);
      for (int64_t i = 0; i < n * size; ++i)
        ASSERT_EQ(all.Get(i), V(static_cast<int>(i / n), i % n));
      // In place: this rank's chunk of the output is the input.
      Elements place(t, n * size);
      for (int64_t i = 0; i < n; ++i) place.Set(r * n + i, V(r, i));
      CommBuffer whole = place.buffer();
      ConstCommBuffer chunk(place.bytes.data() + r * n * DTypeSize(t), n, t);
      ASSERT_TRUE(w->AllGather(chunk, whole).ok());
      for (int64_t i = 0; i < n * size; ++i) {
        ASSERT_EQ(place.Get(i), V(static_cast<int>(i / n), i % n));
      }
    }
  });
}

TEST_P(LocalCollectives, BroadcastBarrierAndSendRecvRing) {
  const int64_t n = this->n();
  const int size = ranks();
  OnRanks(size, [&](Backend& b) {
    auto w = WorldOf(b);
    const int r = w->rank(), root = size - 1;
    for (DType t : kDTypes) {
      Elements e(t, n);
      for (int64_t i = 0; i < n; ++i) e.Set(i, r == root ? V(r, i) : 0.f);
      ASSERT_TRUE(w->Broadcast(e.buffer(), root).ok());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(e.Get(i), V(root, i));
      ASSERT_TRUE(w->Barrier().ok());
      // Two messages with one tag arrive in the order sent; a second tag is matched apart.
      Elements a(t, n), c(t, n), in_a(t, n), in_c(t, n);
      for (int64_t i = 0; i < n; ++i) a.Set(i, V(r, i)), c.Set(i, V(r + 1, i));
      const int next = (r + 1) % size, prev = (r + size - 1) % size;
      HandlePtr rc = w->RecvAsync(in_c.buffer(), prev, {.tag = 9});
      HandlePtr ra = w->RecvAsync(in_a.buffer(), prev, {.tag = 4});
      HandlePtr sa = w->SendAsync(a.buffer(), next, {.tag = 4});
      HandlePtr sc = w->SendAsync(c.buffer(), next, {.tag = 9});
      for (const HandlePtr& h : {sa, sc, ra, rc}) ASSERT_TRUE(h->Wait().ok());
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(in_a.Get(i), V(prev, i));
        ASSERT_EQ(in_c.Get(i), V(prev + 1, i));
      }
    }
  });
}

// An exchange both ways around the ring, every member receiving first: every call its own,
// numbered in turn, traced with its tag and peer, and matched by (peer, tag).
TEST_P(LocalCollectives, ExchangeAroundTheRingBothWays) {
  const int64_t n = this->n();
  const int size = ranks();
  OnRanks(size, [&](Backend& b) {
    auto w = WorldOf(b);
    const int r = w->rank(), next = (r + 1) % size, prev = (r + size - 1) % size;
    for (DType t : kDTypes) {
      b.trace().Clear();
      Elements fwd(t, n), bwd(t, n), from_prev(t, n), from_next(t, n);
      for (int64_t i = 0; i < n; ++i) fwd.Set(i, V(r, i)), bwd.Set(i, V(r + 2, i));
      std::vector<HandlePtr> hs = w->ExchangeAsync(
          {P2PCall::Recv(from_prev.buffer(), prev, 5), P2PCall::Recv(from_next.buffer(), next, 6),
           P2PCall::Send(fwd.buffer(), next, 5), P2PCall::Send(bwd.buffer(), prev, 6)});
      ASSERT_EQ(hs.size(), 4u);
      ASSERT_TRUE(WaitAll(hs, w->DefaultDeadline()).ok());
      for (const HandlePtr& h : hs) ASSERT_TRUE(h->Done());
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(from_prev.Get(i), V(prev, i));
        ASSERT_EQ(from_next.Get(i), V(next + 2, i));
      }
      std::vector<TraceRecord> recs = b.trace().Snapshot();
      ASSERT_EQ(recs.size(), 4u);
      std::sort(recs.begin(), recs.end(),
                [](const TraceRecord& x, const TraceRecord& y) { return x.seq < y.seq; });
      const CommOp ops[] = {CommOp::kRecv, CommOp::kRecv, CommOp::kSend, CommOp::kSend};
      const int peers[] = {prev, next, next, prev}, tags[] = {5, 6, 5, 6};
      for (size_t i = 0; i < 4; ++i) {
        EXPECT_EQ(recs[i].op, ops[i]);
        EXPECT_EQ(recs[i].peer, peers[i]);
        EXPECT_EQ(recs[i].tag, tags[i]);
        EXPECT_EQ(recs[i].seq, recs[0].seq + i);
        EXPECT_EQ(recs[i].bytes, n * static_cast<int64_t>(DTypeSize(t)));
      }
    }
  });
}

// A member that never arrives: every other member's wait ends at its deadline with an error
// naming op, group, members, sequence number and the waiting rank; then nothing more starts.
TEST_P(LocalCollectives, MemberThatNeverArrivesGivesDeadlineExceeded) {
  const int size = ranks();
  if (size < 2) GTEST_SKIP() << "needs a second member";
  const int64_t n = this->n();
  std::string members = "[0";
  for (int m = 1; m < size; ++m) members += ", " + std::to_string(m);
  members += "]";
  OnRanks(size, [&](Backend& b) {
    auto w = WorldOf(b);
    const int r = w->rank();
    if (r == size - 1) return;  // hung: never calls
    Elements e(DType::kF32, n);
    const Status st =
        w->AllReduce(e.buffer(), ReduceOp::kSum, {.deadline = Clock::now() + milliseconds(200)});
    EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded);
    const std::string head = "all_reduce #0 on group 'world' " + members + " (" +
                             std::to_string(n * 4) + " bytes) did not complete within ";
    EXPECT_NE(st.message().find(head), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("(world rank " + std::to_string(r) +
                                " waiting; a member is hung or dead)"),
              std::string::npos)
        << st.ToString();
    EXPECT_TRUE(w->Abandoned());
    const Status next = w->Barrier();
    EXPECT_EQ(next.ToString(), "FailedPrecondition: barrier #1 on group 'world' " + members +
                                   " was not started: all_reduce #0 on group 'world' " + members +
                                   " passed its deadline on this rank before it");
    // The timed-out call's record closed with end = 0 (what a hang detector looks for).
    TraceCursor from;
    const TraceRead read = b.trace().Read(&from);
    ASSERT_EQ(read.records.size(), 2u);
    EXPECT_EQ(read.records[0].op, CommOp::kAllReduce);
    EXPECT_EQ(read.records[0].end_ns, 0);
  });
}

INSTANTIATE_TEST_SUITE_P(RanksBySize, LocalCollectives,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values(int64_t{1}, int64_t{33},
                                                              int64_t{4099})));

TEST(LocalBackend, RefusesWhatItCannotCarry) {
  OnRanks(1, [](Backend& b) {
    auto w = WorldOf(b);
    std::vector<float> f(4);
    const Status cuda = w->AllReduce({f.data(), 4, DType::kF32, Device::kCuda});
    EXPECT_EQ(cuda.ToString(),
              "FailedPrecondition: all_reduce #0 on group 'world' [0]: the local backend cannot "
              "serve device cuda");
    EXPECT_FALSE(b.CanServe(Device::kCuda));
    const Status f64 = w->AllReduce({f.data(), 2, DType::kF64, Device::kCpu});
    EXPECT_EQ(f64.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(f64.message().find("all_reduce #1 on group 'world' [0]: dtype F64"),
              std::string::npos);
    EXPECT_NE(w->Send(f.data(), 4, 1).message().find("send #2 on group 'world' [0]: peer/root 1"),
              std::string::npos);
    EXPECT_FALSE(w->Recv(CommBuffer::Host(f.data(), 4), 0, {.tag = -1}).ok());
    EXPECT_FALSE(
        w->ReduceScatter(ConstCommBuffer::Host(f.data(), 3), CommBuffer::Host(f.data(), 2)).ok());
    std::vector<int32_t> i(4);
    EXPECT_FALSE(
        w->AllGather(ConstCommBuffer::Host(f.data(), 4), CommBuffer::Host(i.data(), 4)).ok());
    EXPECT_FALSE(w->Abandoned());  // refused calls abandon nothing
    // Refused calls are traced too, with no time in flight.
    for (const TraceRecord& rec : b.trace().Snapshot()) EXPECT_EQ(rec.start_ns, rec.end_ns);
  });
}

// An exchange with one call the communicator refuses starts none: each handle fails, the
// refused call's saying why, the others' naming it; nothing is abandoned.
TEST(LocalBackend, AnExchangeStartsWhollyOrNotAtAll) {
  OnRanks(1, [](Backend& b) {
    auto w = WorldOf(b);
    std::vector<float> in(4, -1.f), out(4, 2.f);
    std::vector<HandlePtr> hs =
        w->ExchangeAsync({P2PCall::Recv(CommBuffer::Host(in.data(), 4), 0),
                          P2PCall::Send(ConstCommBuffer::Host(out.data(), 4), 3)});
    ASSERT_EQ(hs.size(), 2u);
    const Status recv = hs[0]->Wait(), send = hs[1]->Wait();
    EXPECT_EQ(recv.ToString(),
              "FailedPrecondition: recv #0 on group 'world' [0] was not started: send #1 on "
              "group 'world' [0], of the same exchange, was refused: peer/root 3 is not a rank "
              "of the group");
    EXPECT_EQ(send.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(send.message().find("send #1 on group 'world' [0]: peer/root 3"), std::string::npos)
        << send.ToString();
    EXPECT_EQ(in, std::vector<float>(4, -1.f));
    EXPECT_EQ(WaitAll(hs, w->DefaultDeadline()).ToString(), recv.ToString());  // the first
    EXPECT_FALSE(w->Abandoned());
    EXPECT_TRUE(w->ExchangeAsync({}).empty());
    // The next exchange runs (a member's send to itself).
    hs = w->ExchangeAsync({P2PCall::Recv(CommBuffer::Host(in.data(), 4), 0, 1),
                           P2PCall::Send(ConstCommBuffer::Host(out.data(), 4), 0, 1)});
    for (const HandlePtr& h : hs) ASSERT_TRUE(h->Wait().ok());
    EXPECT_EQ(in, out);
  });
}

TEST(LocalBackend, MembersThatDisagreeAllGetAnError) {
  OnRanks(2, [](Backend& b) {
    auto w = WorldOf(b);
    std::vector<float> v(5);
    const Status st = w->AllReduce(v.data(), w->rank() == 0 ? 4 : 5);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("disagree on collective 0"), std::string::npos) << st.ToString();
  });
}

TEST(LocalBackend, GroupsFromMemberLists) {
  OnRanks(4, [](Backend& b) {
    const int r = b.world_rank();
    // tp pairs {0,1} {2,3}, dp pairs {0,2} {1,3}, created in the same order everywhere.
    auto tp = b.CreateGroup("tp", {r / 2 * 2, r / 2 * 2 + 1});
    auto dp = b.CreateGroup("dp", {r % 2, r % 2 + 2});
    ASSERT_TRUE(tp.ok() && dp.ok());
    float v = static_cast<float>(r);
    ASSERT_TRUE((*tp)->AllReduce(&v, 1).ok());
    EXPECT_EQ(v, r < 2 ? 1.f : 5.f);
    v = static_cast<float>(r);
    ASSERT_TRUE((*dp)->AllReduce(&v, 1).ok());
    EXPECT_EQ(v, r % 2 == 0 ? 2.f : 4.f);
    EXPECT_EQ((*dp)->members(), (std::vector<int>{r % 2, r % 2 + 2}));
    EXPECT_FALSE(b.CreateGroup("bad", {(r + 1) % 4}).ok());  // not a member
    EXPECT_FALSE(b.CreateGroup("bad", {r, r}).ok());
    EXPECT_FALSE(b.CreateGroup("bad", {r, 4}).ok());
  });
}

TEST(LocalBackend, TraceRecordsEveryCallAndReadsByCursor) {
  OnRanks(2, [](Backend& b) {
    auto w = WorldOf(b);
    const int r = w->rank();
    TraceCursor cursor = b.trace().End();
    std::vector<float> v(64, 1.f);
    ASSERT_TRUE(w->AllReduce(v.data(), 64).ok());
    // Rank 0 posts a receive that rank 1 serves only after the barrier: open meanwhile.
    HandlePtr recv = r == 0 ? w->RecvAsync(CommBuffer::Host(v.data(), 8), 1, {.tag = 3}) : nullptr;
    if (r == 0) {
      const TraceRead open = b.trace().Read(&cursor);
      ASSERT_EQ(open.records.size(), 1u);
      ASSERT_EQ(open.open.size(), 1u);
      EXPECT_EQ(open.open[0].op, CommOp::kRecv);
      EXPECT_EQ(open.open[0].end_ns, 0);
    }
    ASSERT_TRUE(w->Barrier().ok());
    if (r == 1) {
      ASSERT_TRUE(w->Send(CommBuffer::Host(v.data(), 8), 0, {.tag = 3}).ok());
    } else {
      ASSERT_TRUE(recv->Wait().ok());
    }
    const TraceRead read = b.trace().Read(&cursor);
    EXPECT_TRUE(read.open.empty());
    EXPECT_EQ(read.lost, 0u);
    ASSERT_EQ(read.records.size(), r == 0 ? 2u : 3u);  // rank 0 read the all_reduce already
    const TraceRecord& p2p = read.records.back();
    EXPECT_EQ(p2p.op, r == 0 ? CommOp::kRecv : CommOp::kSend);
    EXPECT_EQ(p2p.peer, 1 - r);  // a world rank
    EXPECT_EQ(p2p.tag, 3);
    EXPECT_EQ(p2p.bytes, 32);
    EXPECT_EQ(p2p.seq, r == 0 ? 1u : 2u);
    for (const TraceRecord& rec : b.trace().Snapshot()) {
      EXPECT_EQ(rec.group, "world");
      EXPECT_EQ(rec.dtype, DType::kF32);
      EXPECT_LE(rec.enqueue_ns, rec.start_ns);
      EXPECT_LE(rec.start_ns, rec.end_ns);
    }
    EXPECT_TRUE(b.trace().Read(&cursor).records.empty());
    // Summaries come from the records.
    const std::vector<CommSummary> sums = SummariseCalls(b.trace().Snapshot());
    ASSERT_EQ(sums.size(), 3u);
    EXPECT_EQ(sums[0].op, "all_reduce");
    EXPECT_EQ(sums[0].bytes, 256);
    EXPECT_EQ(sums[1].op, "barrier");
    EXPECT_EQ(sums[2].op, r == 0 ? "recv" : "send");
    EXPECT_EQ(sums[2].count, 1);
  });
}

TEST(LocalBackend, CommunicatorKeepsItsBackendAlive) {
  std::shared_ptr<Communicator> w;
  {
    auto world = CreateLocalWorld(1);
    ASSERT_TRUE(world.ok());
    w = WorldOf(*(*world)[0]);
  }  // the backend's owners are gone; the communicator still holds it
  float v = 2.f;
  ASSERT_TRUE(w->AllReduce(&v, 1).ok());
  EXPECT_EQ(v, 2.f);
}

TEST(BackendFactory, KindsAndTheirWorlds) {
  auto local = CreateBackend(BackendKind::kLocal);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ((*local)->kind(), BackendKind::kLocal);
  EXPECT_EQ((*local)->world_size(), 1);
  EXPECT_EQ((*local)->default_timeout(), milliseconds(TunableOr(kCommTimeoutTunable)));
#ifdef LOOM_HAVE_NCCL
  // Built with NCCL: without a GPU the factory says so (with one, tests/comm/nccl_backend_test
  // runs the backend).
  if (!NcclDeviceForThisRank().ok()) {
    auto nccl = CreateBackend(BackendKind::kNccl);
    ASSERT_FALSE(nccl.ok());
    EXPECT_EQ(nccl.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(nccl.status().message().find("needs a GPU"), std::string::npos);
  }
#else
  auto nccl = CreateBackend(BackendKind::kNccl);
  ASSERT_FALSE(nccl.ok());
  EXPECT_EQ(nccl.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(nccl.status().message().find("'nccl' is not built"), std::string::npos);
#endif
  auto two = CreateLocalWorld(2, {.timeout = milliseconds(1234)});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ((*two)[1]->world_rank(), 1);
  EXPECT_EQ((*two)[1]->default_timeout(), milliseconds(1234));
  EXPECT_FALSE(CreateLocalWorld(0).ok());
}

TEST(TraceRing, ReadsSinceAnIndexAndCountsWhatWasLost) {
  TraceRing ring(3);
  for (uint64_t i = 0; i < 5; ++i) ring.Add({CommOp::kSend, "pp", i});
  uint64_t lost = 0;
  auto recs = ring.Since(1, &lost);
  EXPECT_EQ(lost, 1u);  // records 0 and 1 are gone; 2, 3, 4 remain
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].seq, 2u);
  EXPECT_EQ(ring.total(), 5u);
  ring.Clear();
  EXPECT_TRUE(ring.Since(5, &lost).empty());
  ring.Add({CommOp::kRecv, "pp", 5});
  recs = ring.Since(5, &lost);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].seq, 5u);
}

}  // namespace
}  // namespace loom
