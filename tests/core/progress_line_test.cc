// The progress line: which steps print, in place or as lines, with the shared duration format.
// Output goes to a memory stream.
#include "core/progress_line.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

namespace loom {
namespace {

// A ProgressLine writing to memory; text() is what it printed so far.
class Captured {
 public:
  explicit Captured(ProgressLineOptions o) {
    stream_ = ::open_memstream(&buf_, &size_);
    o.out = stream_;
    line_.emplace(o);
  }
  ~Captured() {
    std::fclose(stream_);
    std::free(buf_);
  }
  ProgressLine& line() { return *line_; }
  std::string text() {
    std::fflush(stream_);
    return std::string(buf_, size_);
  }

 private:
  char* buf_ = nullptr;
  size_t size_ = 0;
  FILE* stream_;
  std::optional<ProgressLine> line_;
};

TEST(ProgressLine, Durations) {
  EXPECT_EQ(FormatDuration(0), "0m00s");
  EXPECT_EQ(FormatDuration(59.4), "0m59s");
  EXPECT_EQ(FormatDuration(59.5), "1m00s");
  EXPECT_EQ(FormatDuration(3599), "59m59s");
  EXPECT_EQ(FormatDuration(3600), "1h00m");
  EXPECT_EQ(FormatDuration(7384), "2h03m");
}

TEST(ProgressLine, ALogGetsALineEveryLogEveryStepsAndTheLast) {
  Captured c({.in_place = false, .log_every = 10, .steps = 25});
  for (int64_t s = 1; s <= 25; ++s) c.line().Show(s, false, "loss %.1f", 0.5);
  EXPECT_EQ(c.text(),
            "step    10/25 | loss 0.5\n"
            "step    20/25 | loss 0.5\n"
            "step    25/25 | loss 0.5\n");
  EXPECT_FALSE(c.line().open());
}

TEST(ProgressLine, StepsSeenOutOfTurnGetALineWhenAMultipleWasPassed) {
  Captured c({.in_place = false, .log_every = 10, .steps = 100});
  EXPECT_FALSE(c.line().Show(0, false, "x"));  // no step yet
  EXPECT_FALSE(c.line().Show(7, false, "x"));
  EXPECT_TRUE(c.line().Show(13, false, "a"));
  EXPECT_FALSE(c.line().Show(13, true, "x"));  // shown already, even as the final one
  EXPECT_FALSE(c.line().Show(19, false, "x"));
  EXPECT_TRUE(c.line().Show(21, false, "b"));
  EXPECT_TRUE(c.line().Show(23, true, "c"));  // the final line
  EXPECT_EQ(c.text(), "step    13/100 | a\nstep    21/100 | b\nstep    23/100 | c\n");
}

TEST(ProgressLine, AResumedRunCountsFromItsFirstStep) {
  Captured c({.in_place = false, .log_every = 10, .steps = 200, .first_step = 100});
  for (int64_t s = 101; s <= 110; ++s) c.line().Show(s, false, "l");
  EXPECT_EQ(c.text(), "step   110/200 | l\n");
}

TEST(ProgressLine, ATerminalLineIsRewrittenInPlaceAndBrokenBeforeOtherOutput) {
  Captured c({.in_place = true, .log_every = 2, .steps = 3});
  c.line().Show(1, false, "a");
  EXPECT_TRUE(c.line().open());
  c.line().Break();
  c.line().Break();  // once
  EXPECT_FALSE(c.line().open());
  c.line().Show(2, false, "b");
  EXPECT_FALSE(c.line().open());
  c.line().Break();  // nothing open
  c.line().Show(3, false, "c");
  EXPECT_EQ(c.text(), "\rstep     1/3 | a\n\rstep     2/3 | b\n\rstep     3/3 | c\n");
  EXPECT_TRUE(c.line().in_place());
  EXPECT_EQ(c.line().shown(), 3);
}

}  // namespace
}  // namespace loom
