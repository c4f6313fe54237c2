// A worker's connection to the coordinator (docs/COORDINATOR.md): register and receive the plan,
// then heartbeats and step reports from a background thread (training never waits for the
// network), and a final Done. Every exchange has a deadline; when the coordinator cannot be
// reached for longer than the deadline, status() turns into an error and training stops.
//
// Thread-safety: ReportStep, SetStep and status may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "comm/trace.h"
#include "core/status.h"
#include "proto/control.pb.h"

namespace loom {

class CoordinatorClient {
 public:
  // Connects to `endpoint` ("host:port"; retried until `timeout_ms` passes: the coordinator may
  // still be starting), registers, and starts the heartbeat thread.
  static Result<std::unique_ptr<CoordinatorClient>> Register(const std::string& endpoint,
                                                             const std::string& token,
                                                             const proto::RegisterRequest& req,
                                                             int timeout_ms);
  ~CoordinatorClient();  // stops the background thread

  const proto::Plan& plan() const { return plan_; }
  // Queues a step report (sent in order by the background thread, all queued ones in one
  // message).
  void ReportStep(proto::StepReport report);
  // The first failure talking to the coordinator (OK while all is well).
  Status status() const;
  // Sends the queued reports and `done`, waits for the acknowledgement, stops heartbeats.
  Status Finish(const proto::Done& done);
  // The trace whose live state the heartbeats carry when the plan asks for it (plan().detect());
  // must outlive the client. Call once, before training.
  void AttachTrace(const CallTrace* trace) { trace_.store(trace); }
  // Added to this process's steady clock (NowNs) gives the coordinator's: estimated at
  // registration and refined by each heartbeat's round trip (the one with the shortest recently).
  int64_t clock_offset_ns() const { return offset_ns_.load(); }
  // Called once, on the background thread, when the coordinator says the job is being stopped
  // (Ack.stop), with its reason. Set before training.
  void OnStop(std::function<void(const std::string&)> handler) { on_stop_ = std::move(handler); }

 private:
  CoordinatorClient() = default;
  void Loop();
  // Sends `msg` and waits for its Ack; an Error reply becomes an error naming the coordinator.
  Status Exchange(proto::Envelope msg, proto::Ack* ack = nullptr);
  // A heartbeat: the step, checkpoint I/O and, with the detector on, where the rank is.
  proto::Envelope Beat(int64_t last_step) const;
  // One round trip's estimate: sent at t0, answered at coordinator time `now_ns`, back at t1.
  void Offset(int64_t t0, int64_t now_ns, int64_t t1);

  int fd_ = -1;
  std::string endpoint_, token_;
  int rank_ = 0;
  int timeout_ms_ = 10000;
  proto::Plan plan_;
  std::mutex io_mu_;  // one exchange on the socket at a time

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<proto::StepReport> queue_;  // GUARDED_BY(mu_)
  int64_t last_step_ = 0;                // GUARDED_BY(mu_)
  bool stop_ = false;                    // GUARDED_BY(mu_)
  Status status_;                        // GUARDED_BY(mu_)
  std::thread thread_;
  std::atomic<const CallTrace*> trace_{nullptr};
  std::atomic<int64_t> offset_ns_{0};
  std::function<void(const std::string&)> on_stop_;
  bool stop_seen_ = false;    // background thread only
  int64_t best_rtt_ns_ = -1;  // of the estimate in use (background thread only)
  int rtt_samples_ = 0;
};

}  // namespace loom
