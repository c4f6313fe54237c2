// The coordinator's TCP service in one process: real sockets on 127.0.0.1. Workers register,
// report and finish through the real client; random bytes, oversized frames, malformed bodies,
// wrong tokens and stalled peers are refused without disturbing the job.
#include "coordinator/service/service.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "control/wire.h"
#include "worker/coordinator_client.h"

namespace loom {
namespace {

JobSpec Spec() {
  JobSpec s;
  s.token = "secret";
  s.layout.dp = 2;
  s.job_yaml = "steps: 3\n";
  s.steps = 3;
  s.tokens_per_step = 64;
  s.heartbeat_ms = 100;
  return s;
}

proto::RegisterRequest Req(int rank) {
  proto::RegisterRequest r;
  r.set_rank(rank);
  r.set_world_size(2);
  r.set_host("localhost");
  r.set_pid(1000 + rank);
  return r;
}

// A raw connection for sending arbitrary bytes.
int Dial(int port) {
  auto fd = ConnectTcp("127.0.0.1:" + std::to_string(port),
                       std::chrono::steady_clock::now() + std::chrono::seconds(5));
  EXPECT_TRUE(fd.ok());
  return fd.ok() ? *fd : -1;
}

// True when the peer closed the connection (within 5 s).
bool ClosedByPeer(int fd) {
  char buf[256];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return false;  // still open after 5 s
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return true;
    if (n < 0 && errno != EAGAIN) return true;  // reset by the peer
  }
}

class Service : public ::testing::Test {
 protected:
  void SetUp() override {
    ServiceOptions o;
    o.message_timeout_ms = 500;
    auto s = CoordinatorService::Start(&job_, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    service_ = std::move(*s);
  }
  std::string Endpoint() const { return service_->endpoint(); }
  JobState job_{Spec()};
  std::unique_ptr<CoordinatorService> service_;
};

TEST_F(Service, WorkersRegisterReportAndFinish) {
  std::vector<std::unique_ptr<CoordinatorClient>> clients;
  for (int r = 0; r < 2; ++r) {
    auto c = CoordinatorClient::Register(Endpoint(), "secret", Req(r), 5000);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ((*c)->plan().dp_rank(), r);
    EXPECT_EQ((*c)->plan().heartbeat_ms(), 100);
    clients.push_back(std::move(*c));
  }
  for (int64_t step = 1; step <= 3; ++step) {
    for (int r = 0; r < 2; ++r) {
      proto::StepReport rep;
      rep.set_rank(r);
      rep.set_step(step);
      rep.set_loss(4.0 - step);
      rep.set_step_s(0.1);
      clients[static_cast<size_t>(r)]->ReportStep(rep);
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few heartbeats go by
  for (int r = 0; r < 2; ++r) {
    proto::Done d;
    d.set_rank(r);
    d.set_ok(true);
    d.set_step(3);
    Status st = clients[static_cast<size_t>(r)]->Finish(d);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  const Progress p = job_.GetProgress();
  EXPECT_EQ(p.step, 3);
  EXPECT_DOUBLE_EQ(p.loss, 1.0);
  EXPECT_EQ(p.done, 2);
  EXPECT_EQ(p.failed, 0);
  EXPECT_GT(service_->stats().messages, 8);  // registers, reports, heartbeats, dones
  // Every message after the register carries when it was sent, on the coordinator's clock.
  const double now = service_->Now();
  for (const RankStatus& r : job_.Ranks()) {
    EXPECT_GT(r.last_sent, now - 5);
    EXPECT_LE(r.last_sent, now + 0.01);  // the offset's error is half a loopback round trip
  }
}

TEST_F(Service, GarbageIsRefusedAndTheJobGoesOn) {
  const int port = service_->port();
  // Random bytes.
  int fd = Dial(port);
  std::mt19937 rng(1);
  std::string noise(64, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  noise[3] = 0x7f;  // a huge size
  ASSERT_EQ(::send(fd, noise.data(), noise.size(), 0), 64);
  EXPECT_TRUE(ClosedByPeer(fd));
  ::close(fd);
  // A frame announcing 8 bytes of something that is not a message.
  fd = Dial(port);
  ASSERT_EQ(::send(fd, "\x08\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff", 12, 0), 12);
  EXPECT_TRUE(ClosedByPeer(fd));
  ::close(fd);
  // A peer that stops in the middle of a message is dropped after the message deadline.
  fd = Dial(port);
  ASSERT_EQ(::send(fd, "\x40\x00\x00\x00\x0a", 5, 0), 5);
  EXPECT_TRUE(ClosedByPeer(fd));
  ::close(fd);
  // Another job's worker.
  auto other = CoordinatorClient::Register(Endpoint(), "other-job", Req(0), 2000);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("wrong job token"), std::string::npos);
  // A worker whose rank is out of range.
  auto bad = CoordinatorClient::Register(Endpoint(), "secret", Req(7), 2000);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("field 'rank'"), std::string::npos);
  const ServiceStats st = service_->stats();
  EXPECT_EQ(st.rejected_oversized, 1);
  EXPECT_EQ(st.rejected_malformed, 1);
  EXPECT_EQ(st.timed_out, 1);
  EXPECT_EQ(st.rejected_token, 1);
  EXPECT_EQ(st.rejected_protocol, 1);
  // The service still serves the real workers.
  auto good = CoordinatorClient::Register(Endpoint(), "secret", Req(1), 2000);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(job_.GetProgress().registered, 1);
}

TEST_F(Service, AConnectionSpeaksForItsOwnRankOnly) {
  // A large frame before registering is refused at once (no 16 MiB buffer for strangers).
  int fd = Dial(service_->port());
  ASSERT_EQ(::send(fd, "\x00\x00\x01\x00", 4, 0), 4);  // 64 KiB + ...: 65536 bytes announced
  EXPECT_TRUE(ClosedByPeer(fd));
  ::close(fd);
  // Rank 0 registers, then tries to report for rank 1.
  fd = Dial(service_->port());
  const auto deadline = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(5); };
  proto::Envelope reg;
  reg.set_job_token("secret");
  *reg.mutable_register_() = Req(0);
  ASSERT_TRUE(SendMessage(fd, reg, deadline(), "test").ok());
  auto plan = RecvMessage(fd, deadline(), "test");
  ASSERT_TRUE(plan.ok() && plan->has_plan());
  proto::Envelope report;
  report.set_job_token("secret");
  report.mutable_step_report()->set_rank(1);
  report.mutable_step_report()->set_step(1);
  ASSERT_TRUE(SendMessage(fd, report, deadline(), "test").ok());
  auto reply = RecvMessage(fd, deadline(), "test");
  ASSERT_TRUE(reply.ok());
  ASSERT_TRUE(reply->has_error());
  EXPECT_NE(reply->error().message().find("this connection registered rank 0, not 1"),
            std::string::npos);
  EXPECT_TRUE(ClosedByPeer(fd));
  ::close(fd);
  // A batch of reports with one of another rank's among rank 0's.
  fd = Dial(service_->port());
  ASSERT_TRUE(SendMessage(fd, reg, deadline(), "test").ok());
  plan = RecvMessage(fd, deadline(), "test");
  ASSERT_TRUE(plan.ok() && plan->has_plan());
  proto::Envelope batch;
  batch.set_job_token("secret");
  for (int rank : {0, 1}) {
    proto::StepReport& r = *batch.mutable_step_reports()->add_reports();
    r.set_rank(rank);
    r.set_step(1);
  }
  ASSERT_TRUE(SendMessage(fd, batch, deadline(), "test").ok());
  reply = RecvMessage(fd, deadline(), "test");
  ASSERT_TRUE(reply.ok() && reply->has_error());
  EXPECT_NE(reply->error().message().find("this connection registered rank 0, not 1"),
            std::string::npos);
  EXPECT_TRUE(ClosedByPeer(fd));
  ::close(fd);
  // A connection whose first message is not a register.
  fd = Dial(service_->port());
  report.mutable_step_report()->set_rank(0);
  ASSERT_TRUE(SendMessage(fd, report, deadline(), "test").ok());
  reply = RecvMessage(fd, deadline(), "test");
  ASSERT_TRUE(reply.ok() && reply->has_error());
  EXPECT_NE(reply->error().message().find("must be a register"), std::string::npos);
  ::close(fd);
}

// A job of short steps: the reports a worker queued while an exchange was under way go in one
// message, so the coordinator keeps up instead of taking one round trip per step.
TEST(ServiceBatches, QueuedReportsTravelTogetherInOrder) {
  JobSpec spec = Spec();
  spec.layout.dp = 1;
  spec.steps = 500;
  JobState job(spec);
  ServiceOptions o;
  o.message_timeout_ms = 2000;
  auto service = CoordinatorService::Start(&job, o);
  ASSERT_TRUE(service.ok()) << service.status().ToString();
  proto::RegisterRequest req = Req(0);
  req.set_world_size(1);
  auto c = CoordinatorClient::Register((*service)->endpoint(), "secret", req, 5000);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (int64_t step = 1; step <= 500; ++step) {
    proto::StepReport rep;
    rep.set_rank(0);
    rep.set_step(step);  // out of order, or one lost, and the coordinator refuses the rest
    rep.set_loss(1.0 / static_cast<double>(step));
    (*c)->ReportStep(rep);
  }
  proto::Done d;
  d.set_rank(0);
  d.set_ok(true);
  d.set_step(500);
  const Status st = (*c)->Finish(d);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const Progress p = job.GetProgress();
  EXPECT_EQ(p.step, 500);
  EXPECT_DOUBLE_EQ(p.loss, 1.0 / 500);
  EXPECT_EQ(p.done, 1);
  // Register, the reports, done (and maybe a heartbeat): one message per report would be 502.
  // The reports were queued within microseconds, an exchange takes tens of them; at most 64
  // reports per message makes it at least 8 messages + 2.
  const int64_t messages = (*service)->stats().messages;
  EXPECT_GE(messages, 10);
  EXPECT_LE(messages, 100);
}

TEST_F(Service, AWorkerLosesACoordinatorThatStops) {
  auto c = CoordinatorClient::Register(Endpoint(), "secret", Req(0), 1000);
  ASSERT_TRUE(c.ok());
  service_->Stop();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*c)->status().ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_FALSE((*c)->status().ok());  // training would stop instead of running blind
}

}  // namespace
}  // namespace loom
