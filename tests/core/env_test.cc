// core/env: integer tunables are read strictly (whole numbers in range) and refused by name.
#include "core/env.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace loom {
namespace {

constexpr IntTunable kTest{"LOOM_TEST_TUNABLE_MS", 250, 0, 1000, "a number of ms"};

class EnvTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv(kTest.name); }
};

TEST_F(EnvTest, UnsetOrEmptyGivesTheFallback) {
  unsetenv(kTest.name);
  ASSERT_TRUE(ReadTunable(kTest).ok());
  EXPECT_EQ(*ReadTunable(kTest), 250);
  setenv(kTest.name, "", 1);
  EXPECT_EQ(*ReadTunable(kTest), 250);
}

TEST_F(EnvTest, WholeNumbersInRangeAreRead) {
  for (const auto& [text, want] : {std::pair{"0", 0}, {"1000", 1000}, {"17", 17}}) {
    setenv(kTest.name, text, 1);
    Result<int64_t> r = ReadTunable(kTest);
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().message();
    EXPECT_EQ(*r, want);
    EXPECT_EQ(TunableOr(kTest), want);
  }
}

TEST_F(EnvTest, AnythingElseIsRefusedByName) {
  for (const char* text :
       {"abc", "10s", "-1", "1001", " 5", "5 ", "1e3", "0x10", "+5", "99999999999999999999"}) {
    setenv(kTest.name, text, 1);
    Result<int64_t> r = ReadTunable(kTest);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().message(),
              std::string("environment variable LOOM_TEST_TUNABLE_MS: expected a number of ms, a "
                          "whole number from 0 to 1000, got '") +
                  text + "'");
    EXPECT_EQ(TunableOr(kTest), 250) << text;  // readers that cannot fail keep the default
  }
}

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

  setenv("LOOM_LOG_LEVEL", "warn", 1);
  EXPECT_TRUE(CheckTunables().ok());
  setenv("LOOM_LOG_LEVEL", "verbose", 1);
  st = CheckTunables();
  unsetenv("LOOM_LOG_LEVEL");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("LOOM_LOG_LEVEL: expected DEBUG, INFO, WARN or ERROR, got 'verbose'"),
            std::string::npos);
}

}  // namespace
}  // namespace loom
