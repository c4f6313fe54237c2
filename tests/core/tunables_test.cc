// core/tunables: integer tunables are read strictly (whole numbers in range) and refused by name.
#include "core/tunables.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "tests/core/tunables_env.h"

namespace loom {
namespace {

constexpr IntTunable kTest{"LOOM_TEST_TUNABLE_MS", 250, 0, 1000, "a number of ms"};

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

}  // namespace
}  // namespace loom
