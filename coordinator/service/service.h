// The coordinator's TCP service (Boost.Asio, one I/O thread): workers connect, Register and get
// their Plan, then send Heartbeats, StepReports and a final Done over the same connection, each
// answered by an Ack (or an Error). Messages are length-prefixed Protobuf (control/wire.h).
//
// Nothing a peer sends can harm the service: a message with another job's token gets an Error
// and the connection is closed; an oversized frame, bytes that are not a message, or a message
// a worker must not send close the connection; every read and write has a deadline (a peer that
// stalls mid-message, or a connection silent longer than the idle limit, is closed). Each
// rejection is logged (subsystem COORD) and counted.
//
// Thread-safety: Start/Stop and the accessors may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "coordinator/service/job_state.h"
#include "core/status.h"

namespace loom {

struct ServiceOptions {
  std::string address = "127.0.0.1";
  int port = 0;                    // 0: any free port
  int message_timeout_ms = 10000;  // a started message must arrive completely within this
  int idle_timeout_ms = 0;  // close a connection silent this long (0: 5 heartbeats, at least 10 s)
};

struct ServiceStats {
  int64_t connections = 0;
  int64_t messages = 0;  // accepted and answered
  int64_t rejected_token = 0, rejected_malformed = 0, rejected_oversized = 0, rejected_protocol = 0,
          timed_out = 0;
};

class CoordinatorService {
 public:
  // `job` must outlive the service. Listens before returning.
  static Result<std::unique_ptr<CoordinatorService>> Start(JobState* job,
                                                           const ServiceOptions& options);
  ~CoordinatorService();  // Stop()
  void Stop();

  int port() const { return port_; }
  std::string endpoint() const;  // "127.0.0.1:port"
  ServiceStats stats() const;
  // From now on, messages go to `job` (a restarted incarnation: its own token, so that workers
  // of the previous one are refused); it must outlive the service.
  void SetJob(JobState* job);
  // Seconds since the service started: the clock JobState is fed with.
  double Now() const;

  struct Impl;  // defined in service.cc

 private:
  CoordinatorService() = default;
  std::unique_ptr<Impl> impl_;
  std::string address_;
  int port_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace loom
