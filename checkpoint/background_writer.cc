// A task queue with one thread, keeping the first failure.
#include "checkpoint/background_writer.h"

#include <chrono>
#include <string>

#include "core/threads.h"

namespace loom {

BackgroundWriter::BackgroundWriter() : thread_([this] { Loop(); }) {}

BackgroundWriter::~BackgroundWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BackgroundWriter::Submit(std::function<Status()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_all();
}

bool BackgroundWriter::Idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && !busy_;
}

Status BackgroundWriter::WaitIdle(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                    [&] { return queue_.empty() && !busy_; })) {
    return DeadlineExceeded("checkpoint writer still busy after " + std::to_string(timeout_ms) +
                            " ms");
  }
  return Status::Ok();
}

Status BackgroundWriter::TakeStatus() {
  std::lock_guard<std::mutex> lock(mu_);
  Status s = status_;
  status_ = Status::Ok();
  return s;
}

void BackgroundWriter::Loop() {
  SetThreadName("loom-save");
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop requested and nothing left
    std::function<Status()> task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    Status st = task();
    lock.lock();
    busy_ = false;
    if (!st.ok() && status_.ok()) status_ = st;
    cv_.notify_all();
  }
}

}  // namespace loom
