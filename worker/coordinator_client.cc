// The worker side of the control plane.
#include "worker/coordinator_client.h"

#include "worker/checkpointer.h"

#include <unistd.h>

#include <chrono>

#include "core/logging.h"
#include "control/wire.h"

namespace loom {
namespace {

WireDeadline After(int ms) {
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
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
  LOOM_RETURN_IF_ERROR(SendMessage(c->fd_, msg, After(timeout_ms), peer));
  LOOM_ASSIGN_OR_RETURN(proto::Envelope reply, RecvMessage(c->fd_, After(timeout_ms), peer));
  if (reply.has_error()) {
    return FailedPrecondition(peer + " refused rank " + std::to_string(req.rank()) + ": " +
                              reply.error().message());
  }
  if (!reply.has_plan()) return InvalidArgument(peer + ": expected a plan in reply to register");
  c->plan_ = reply.plan();
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

Status CoordinatorClient::Exchange(proto::Envelope msg) {
  std::lock_guard<std::mutex> lock(io_mu_);
  msg.set_job_token(token_);
  const std::string peer = "coordinator " + endpoint_;
  LOOM_RETURN_IF_ERROR(SendMessage(fd_, msg, After(timeout_ms_), peer));
  LOOM_ASSIGN_OR_RETURN(proto::Envelope reply, RecvMessage(fd_, After(timeout_ms_), peer));
  if (reply.has_error()) return FailedPrecondition(peer + ": " + reply.error().message());
  if (!reply.has_ack()) return InvalidArgument(peer + ": expected an acknowledgement");
  return Status::Ok();
}

void CoordinatorClient::Loop() {
  const auto period = std::chrono::milliseconds(std::max(100, plan_.heartbeat_ms()));
  auto next_beat = std::chrono::steady_clock::now() + period;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_ && status_.ok()) {
    cv_.wait_until(lock, next_beat, [&] { return stop_ || !queue_.empty(); });
    if (stop_) break;
    proto::Envelope msg;
    if (!queue_.empty()) {
      *msg.mutable_step_report() = std::move(queue_.front());
      queue_.pop_front();
    } else {
      msg.mutable_heartbeat()->set_rank(rank_);
      msg.mutable_heartbeat()->set_step(last_step_);
      msg.mutable_heartbeat()->set_checkpoint_io(CheckpointIoInProgress());
      next_beat = std::chrono::steady_clock::now() + period;
    }
    lock.unlock();
    Status st = Exchange(std::move(msg));
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
  for (proto::StepReport& r : rest) {
    proto::Envelope msg;
    *msg.mutable_step_report() = std::move(r);
    LOOM_RETURN_IF_ERROR(Exchange(std::move(msg)));
  }
  proto::Envelope msg;
  *msg.mutable_done() = done;
  return Exchange(std::move(msg));
}

}  // namespace loom
