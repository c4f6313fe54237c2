// core/env: integer tunables are read strictly (whole numbers in range) and refused by name.
#include "core/tunables.h"

#include "checkpoint/io_activity.h"
#include "checkpoint/writer.h"
#include "comm/backend.h"
#include "core/threads.h"
#include "worker/run_lock.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace loom {
namespace {

// Each test starts without any of the tunables set (whatever the environment running the tests
// has), and gets the environment's values back afterwards.
class EnvTest : public ::testing::Test {
 protected:
  static constexpr const char* kNames[] = {"LOOM_THREADS",         "LOOM_COMM_TIMEOUT_MS",
                                           "LOOM_CKPT_TIMEOUT_MS", "LOOM_CKPT_LOCK_WAIT_MS",
                                           "LOOM_ABORT_GRACE_MS",  "LOOM_CKPT_DIRECT_IO",
                                           "LOOM_LOG_LEVEL",       "LOOM_LOG_SUBSYS"};
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

TEST_F(EnvTest, CheckTunablesNamesTheFirstBadOne) {
  ASSERT_TRUE(CheckTunables().ok());
  setenv("LOOM_CKPT_LOCK_WAIT_MS", "10s", 1);
  Status st = CheckTunables();
  unsetenv("LOOM_CKPT_LOCK_WAIT_MS");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("LOOM_CKPT_LOCK_WAIT_MS"), std::string::npos) << st.message();

  setenv("LOOM_THREADS", "0", 1);
  st = CheckTunables();
  unsetenv("LOOM_THREADS");
  EXPECT_FALSE(st.ok());

  for (const char* v : {"0", "1", ""}) {
    setenv("LOOM_CKPT_DIRECT_IO", v, 1);
    EXPECT_TRUE(CheckTunables().ok()) << v;
  }
  setenv("LOOM_CKPT_DIRECT_IO", "off", 1);
  st = CheckTunables();
  unsetenv("LOOM_CKPT_DIRECT_IO");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("LOOM_CKPT_DIRECT_IO: expected 0"), std::string::npos);

  setenv("LOOM_LOG_SUBSYS", "CKPT,COMM", 1);
  EXPECT_TRUE(CheckTunables().ok());
  setenv("LOOM_LOG_SUBSYS", "CKPT,CHECKPOINT", 1);
  st = CheckTunables();
  unsetenv("LOOM_LOG_SUBSYS");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("LOOM_LOG_SUBSYS: expected a comma-separated list"),
            std::string::npos);

  setenv("LOOM_LOG_LEVEL", "warn", 1);
  EXPECT_TRUE(CheckTunables().ok());
  setenv("LOOM_LOG_LEVEL", "verbose", 1);
  st = CheckTunables();
  unsetenv("LOOM_LOG_LEVEL");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("LOOM_LOG_LEVEL: expected DEBUG, INFO, WARN or ERROR, got 'verbose'"),
            std::string::npos);
}

// The registry holds what the program links: these are the files that declare them.
TEST_F(EnvTest, EveryLayerRegistersItsTunables) {
  EXPECT_STREQ(kThreadsTunable.name, "LOOM_THREADS");
  EXPECT_STREQ(kCommTimeoutTunable.name, "LOOM_COMM_TIMEOUT_MS");
  EXPECT_STREQ(kCkptTimeoutTunable.name, "LOOM_CKPT_TIMEOUT_MS");
  EXPECT_STREQ(kCkptLockWaitTunable.name, "LOOM_CKPT_LOCK_WAIT_MS");
  (void)CheckpointDirectIo();  // checkpoint/writer.cc registers LOOM_CKPT_DIRECT_IO
  for (const IntTunable* t :
       {&kThreadsTunable, &kCommTimeoutTunable, &kCkptTimeoutTunable, &kCkptLockWaitTunable}) {
    setenv(t->name, "-5", 1);
    const Status st = CheckTunables();
    unsetenv(t->name);
    ASSERT_FALSE(st.ok()) << t->name;
    EXPECT_NE(st.message().find(std::string("environment variable ") + t->name), std::string::npos)
        << st.message();
  }
}

}  // namespace
}  // namespace loom
