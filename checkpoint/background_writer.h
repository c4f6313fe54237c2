// One background thread running tasks in order: the save engine's writer (this rank's part of a
// save) and committer (commits and retention), so that the step loop never waits for either
// unless it must.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "core/status.h"

namespace loom {

// Thread-safe.
class BackgroundWriter {
 public:
  BackgroundWriter();
  ~BackgroundWriter();  // finishes queued tasks
  void Submit(std::function<Status()> task);
  bool Idle();
  // Waits until idle; DeadlineExceeded after `timeout_ms`.
  Status WaitIdle(int64_t timeout_ms);
  // The first failure since the last call (OK if none), and clears it.
  Status TakeStatus();

 private:
  void Loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<Status()>> queue_;  // GUARDED_BY(mu_)
  bool busy_ = false, stop_ = false;           // GUARDED_BY(mu_)
  Status status_;                              // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace loom
