// The worker side of the control plane.
#include "worker/coordinator_client.h"

#include "worker/checkpointer.h"

#include <unistd.h>

#include <chrono>

#include "control/wire.h"
#include "core/logging.h"
#include "core/threads.h"

namespace loom {
namespace {

WireDeadline After(int ms) {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
}

// The most reports one message carries: far below the wire's 16 MiB limit even with a large
// job's evidence (a few hundred calls per step, ~50 bytes each).
constexpr size_t kMaxReportsPerMessage = 64;

// Moves up to kMaxReportsPerMessage reports from the front of `queue` into one message.
proto::Envelope TakeReports(std::deque<proto::StepReport>* queue) {
  proto::Envelope msg;
  proto::StepReports& batch = *msg.mutable_step_reports();
  while (!queue->empty() && static_cast<size_t>(batch.reports_size()) < kMaxReportsPerMessage) {
    *batch.add_reports() = std::move(queue->front());
    queue->pop_front();
  }
  return msg;
}

}  // namespace

Result<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Register(
    const std::string& endpoint, const std::string& token, const proto::RegisterRequest& req,
    int timeout_ms) {
  std::unique_ptr<CoordinatorClient> c(new CoordinatorClient());
  c->endpoint_ = endpoint;
  c->token_ = token;
  c->rank_ = req.rank();
  c->timeout_ms_ = timeout_ms;
  LOOM_ASSIGN_OR_RETURN(c->fd_, ConnectTcp(endpoint, After(timeout_ms)));
  proto::Envelope msg;
  msg.set_job_token(token);
  *msg.mutable_register_() = req;
  const std::string peer = "coordinator " + endpoint;
  const int64_t t0 = NowNs();
  LOOM_RETURN_IF_ERROR(SendMessage(c->fd_, msg, After(timeout_ms), peer));
  LOOM_ASSIGN_OR_RETURN(proto::Envelope reply, RecvMessage(c->fd_, After(timeout_ms), peer));
  const int64_t t1 = NowNs();
  if (reply.has_error()) {
    return FailedPrecondition(peer + " refused rank " + std::to_string(req.rank()) + ": " +
                              reply.error().message());
  }
  if (!reply.has_plan()) return InvalidArgument(peer + ": expected a plan in reply to register");
  c->plan_ = reply.plan();
  c->Offset(t0, reply.plan().coordinator_ns(), t1);
  CoordinatorClient* raw = c.get();
  c->thread_ = std::thread([raw] { raw->Loop(); });
  return c;
}

CoordinatorClient::~CoordinatorClient() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

void CoordinatorClient::ReportStep(proto::StepReport report) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_step_ = report.step();
    queue_.push_back(std::move(report));
  }
  cv_.notify_all();
}

Status CoordinatorClient::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void CoordinatorClient::Offset(int64_t t0, int64_t now_ns, int64_t t1) {
  const int64_t rtt = t1 - t0;
  // The shortest round trip bounds the error best (by half of it); a fresh one now and then
  // follows a drift between the two clocks.
  if (best_rtt_ns_ < 0 || rtt <= best_rtt_ns_ || ++rtt_samples_ >= 64) {
    best_rtt_ns_ = rtt;
    rtt_samples_ = 0;
    offset_ns_.store(now_ns - (t0 + t1) / 2);
  }
}

proto::Envelope CoordinatorClient::Beat(int64_t last_step) const {
  proto::Envelope msg;
  proto::Heartbeat& hb = *msg.mutable_heartbeat();
  hb.set_rank(rank_);
  hb.set_step(last_step);
  hb.set_checkpoint_io(CheckpointIoInProgress());
  hb.set_sent_ns(NowNs());
  const CallTrace* trace = trace_.load();
  if (!plan_.detect() || trace == nullptr) return msg;
  const TraceLive live = trace->Live();
  const int64_t off = offset_ns_.load();
  if (live.blocked) {
    proto::LiveCall& b = *hb.mutable_blocked();
    b.set_op(CommOpName(live.call.op));
    b.set_group(live.call.group);
    b.set_root(live.call.group_root);
    const bool p2p = live.call.op == CommOp::kSend || live.call.op == CommOp::kRecv;
    b.set_seq(p2p ? live.call.seq : live.call.collective_seq);
    b.set_peer(p2p ? live.call.peer : -1);
    b.set_since_ns(live.since_ns + off);
  }
  for (const auto& [group, next] : live.issued) {
    proto::IssuedCount& c = *hb.add_issued();
    c.set_group(group.first);
    c.set_root(group.second);
    c.set_next_seq(next);
  }
  return msg;
}

Status CoordinatorClient::Exchange(proto::Envelope msg, proto::Ack* ack) {
  std::lock_guard<std::mutex> lock(io_mu_);
  msg.set_job_token(token_);
  msg.set_sent_ns(NowNs() + offset_ns_.load());
  const std::string peer = "coordinator " + endpoint_;
  LOOM_RETURN_IF_ERROR(SendMessage(fd_, msg, After(timeout_ms_), peer));
  LOOM_ASSIGN_OR_RETURN(proto::Envelope reply, RecvMessage(fd_, After(timeout_ms_), peer));
  if (reply.has_error()) return FailedPrecondition(peer + ": " + reply.error().message());
  if (!reply.has_ack()) return InvalidArgument(peer + ": expected an acknowledgement");
  if (ack != nullptr) *ack = reply.ack();
  return Status::Ok();
}

void CoordinatorClient::Loop() {
  SetThreadName("loom-report");
  const auto period = std::chrono::milliseconds(std::max(20, plan_.heartbeat_ms()));
  auto next_beat = std::chrono::steady_clock::now() + period;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_ && status_.ok()) {
    cv_.wait_until(lock, next_beat, [&] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    proto::Envelope msg;
    const bool beat = queue_.empty();
    if (!beat) {
      msg = TakeReports(&queue_);
    } else {
      msg = Beat(last_step_);
      next_beat = std::chrono::steady_clock::now() + period;
    }
    lock.unlock();
    proto::Ack ack;
    const int64_t t0 = NowNs();
    Status st = Exchange(std::move(msg), &ack);
    if (st.ok() && beat) Offset(t0, ack.now_ns(), NowNs());
    if (st.ok() && !ack.stop().empty() && !stop_seen_ && on_stop_) {
      stop_seen_ = true;
      on_stop_(ack.stop());
    }
    lock.lock();
    if (!st.ok() && status_.ok()) {
      status_ = st;
      LOOM_LOG(ERROR, COORD) << "lost the coordinator: " << ForUser(st, LogSubsys::COORD);
    }
  }
}

Status CoordinatorClient::Finish(const proto::Done& done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::deque<proto::StepReport> rest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    LOOM_RETURN_IF_ERROR(status_);
    rest.swap(queue_);
  }
  while (!rest.empty()) LOOM_RETURN_IF_ERROR(Exchange(TakeReports(&rest)));
  proto::Envelope msg;
  *msg.mutable_done() = done;
  return Exchange(std::move(msg));
}

}  // namespace loom
