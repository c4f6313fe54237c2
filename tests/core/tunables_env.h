// A test fixture for tunables: each test starts without any LOOM_* tunable set (whatever the
// environment running the tests has), and the environment's values come back afterwards.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace loom {

class EnvTest : public ::testing::Test {
 protected:
  static constexpr const char* kNames[] = {
      "LOOM_THREADS",           "LOOM_COMM_TIMEOUT_MS", "LOOM_CKPT_TIMEOUT_MS",
      "LOOM_CKPT_LOCK_WAIT_MS", "LOOM_ABORT_GRACE_MS",  "LOOM_CKPT_DIRECT_IO",
      "LOOM_LOG_LEVEL",         "LOOM_LOG_SUBSYS",      "LOOM_TEST_TUNABLE_MS"};
  void SetUp() override {
    for (const char* n : kNames) {
      const char* v = std::getenv(n);
      if (v != nullptr) saved_.emplace_back(n, v);
      unsetenv(n);
    }
  }
  void TearDown() override {
    for (const char* n : kNames) unsetenv(n);
    for (const auto& [n, v] : saved_) setenv(n.c_str(), v.c_str(), 1);
  }
  std::vector<std::pair<std::string, std::string>> saved_;
};

}  // namespace loom
