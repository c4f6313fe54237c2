// The tunables registry of a program: every LOOM_* tunable is declared next to its use and
// registered there (core, comm, checkpoint, worker), and CheckTunables refuses the first one set
// to an invalid value, by name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "checkpoint/io_activity.h"
#include "checkpoint/writer.h"
#include "comm/backend.h"
#include "core/threads.h"
#include "core/tunables.h"
#include "tests/core/tunables_env.h"
#include "worker/run_lock.h"

namespace loom {
namespace {

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
