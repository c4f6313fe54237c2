// The series file's records: written and read back alike; a bad line named by file, line and
// field; a run killed mid-write still read up to its last whole line.
#include "coordinator/metrics/run_record.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace loom {
namespace {

PlanRecord Plan() {
  PlanRecord p;
  p.epoch = 1;
  p.t = 2.5;
  p.job = "job.yaml";
  p.tp = 2;
  p.dp = 2;
  p.zero = 1;
  p.steps = 40;
  p.tokens_per_step = 2048;
  p.precision = "bf16";
  for (int r = 0; r < 4; ++r) {
    p.ranks.push_back({r, "n" + std::to_string(r / 2), "host" + std::to_string(r / 2), r % 2, r % 2,
                       0, 0, r / 2});
  }
  return p;
}

StepRecord Step(int64_t s) {
  StepRecord r;
  r.step = s;
  r.epoch = 1;
  r.t = 3.0 + static_cast<double>(s);
  r.loss = 5.0 / static_cast<double>(s);
  r.step_s = 0.25;
  r.tokens_per_s = 8192;
  r.mfu = 0.4;
  r.rank_step_s = {0.25, 0.24, 0.25, 0.23};
  r.rank_wait_s = {0.01, 0.02, 0.0, 0.05};
  r.comm_s = {{"tp", 0.4}, {"dp", 0.1}};
  r.exposed_s = {{"tp", 0.05}};
  r.snapshot_step = s - 1;
  return r;
}

std::string Log() {
  return ToJsonLine(Plan()) + "\n" + ToJsonLine(Step(1)) + "\n" + ToJsonLine(Step(2)) + "\n" +
         ToJsonLine(EventRecord{4.5, 2, 1, "slow rank", "rank 3 is slow (score 1.6)"}) + "\n";
}

TEST(RunRecord, RoundTrip) {
  Result<RunHistory> h = ParseRunLog(Log(), "series.jsonl");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->plans.size(), 1u);
  EXPECT_EQ(h->plans[0].tp, 2);
  EXPECT_EQ(h->plans[0].precision, "bf16");
  EXPECT_EQ(h->plans[0].ranks.size(), 4u);
  EXPECT_EQ(h->plans[0].ranks[3].host, "host1");
  EXPECT_EQ(h->plans[0].ranks[3].dp, 1);
  ASSERT_EQ(h->steps.size(), 2u);
  EXPECT_EQ(h->steps[1].step, 2);
  EXPECT_DOUBLE_EQ(h->steps[1].loss, 2.5);
  EXPECT_EQ(h->steps[0].rank_wait_s, Step(1).rank_wait_s);
  EXPECT_EQ(h->steps[0].comm_s, Step(1).comm_s);
  ASSERT_EQ(h->events.size(), 1u);
  EXPECT_EQ(h->events[0].kind, "slow rank");
  // Written again from what was read: the same text.
  std::string again = ToJsonLine(h->plans[0]) + "\n";
  for (const StepRecord& s : h->steps) again += ToJsonLine(s) + "\n";
  again += ToJsonLine(h->events[0]) + "\n";
  EXPECT_EQ(again, Log());
}

TEST(RunRecord, CutShortLastLineIsDropped) {
  const std::string full = Log();
  const std::string cut = full + ToJsonLine(Step(3)).substr(0, 40);  // killed mid-write
  Result<RunHistory> h = ParseRunLog(cut, "series.jsonl");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->steps.size(), 2u);
}

TEST(RunRecord, BadLinesAreNamed) {
  std::string bad = Log();
  bad.insert(bad.find('\n') + 1, "not json\n");
  Result<RunHistory> h = ParseRunLog(bad, "run/series.jsonl");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("run/series.jsonl:2"), std::string::npos)
      << h.status().message();

  std::string no_loss = ToJsonLine(Plan()) + "\n" + ToJsonLine(Step(1)) + "\n";
  no_loss.replace(no_loss.find("\"loss\""), 6, "\"lost\"");
  h = ParseRunLog(no_loss, "s.jsonl");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("s.jsonl:2: field 'loss' is missing"), std::string::npos)
      << h.status().message();

  std::string typed = ToJsonLine(Plan()) + "\n";
  typed.replace(typed.find("\"steps\":40"), 10, "\"steps\":\"x\"");
  h = ParseRunLog(typed, "s.jsonl");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("field 'steps' has the wrong type"), std::string::npos)
      << h.status().message();

  h = ParseRunLog(ToJsonLine(Step(1)) + "\n", "s.jsonl");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("no plan record"), std::string::npos);

  h = ParseRunLog(R"({"kind":"stpe"})"
                  "\n",
                  "s.jsonl");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("expected plan, step or event, got 'stpe'"),
            std::string::npos);
}

// A series written before plans named their precision reads as fp32; a bad one is named.
TEST(RunRecord, PrecisionOfAPlan) {
  std::string old = ToJsonLine(Plan()) + "\n";
  old.replace(old.find("\"precision\":\"bf16\","), 19, "");
  Result<RunHistory> h = ParseRunLog(old, "s.jsonl");
  ASSERT_TRUE(h.ok()) << h.status().ToString() << "\n" << old;
  EXPECT_EQ(h->plans[0].precision, "fp32");
  std::string bad = ToJsonLine(Plan()) + "\n";
  bad.replace(bad.find("\"bf16\""), 6, "\"fp16\"");
  h = ParseRunLog(bad, "s.jsonl");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(
      h.status().message().find("s.jsonl:1: field 'precision': expected fp32 or bf16, got 'fp16'"),
      std::string::npos)
      << h.status().message();
}

TEST(RunRecord, HistoryJsonKeepsTheNewestSteps) {
  RunHistory h;
  h.plans.push_back(Plan());
  for (int s = 1; s <= 10; ++s) h.steps.push_back(Step(s));
  const std::string doc = HistoryJson(h, true, "running", 3);
  EXPECT_NE(doc.find("\"step\":10"), std::string::npos);
  EXPECT_NE(doc.find("\"step\":8"), std::string::npos);
  EXPECT_EQ(doc.find("\"step\":7,"), std::string::npos);
  EXPECT_NE(doc.find("\"live\":true"), std::string::npos);
}

TEST(RunRecord, HistoryJsonKeepsPerRankFiguresForTheNewestStepsOnly) {
  RunHistory h;
  h.plans.push_back(Plan());
  for (int s = 1; s <= static_cast<int>(kRankedSteps) + 5; ++s) h.steps.push_back(Step(s));
  const nlohmann::json doc = nlohmann::json::parse(HistoryJson(h, false, "finished", 0));
  ASSERT_EQ(doc["steps"].size(), kRankedSteps + 5);
  EXPECT_TRUE(doc["steps"][4]["rank_wait_s"].empty());
  EXPECT_EQ(doc["steps"][5]["rank_wait_s"].size(), 4u);
  EXPECT_EQ(doc["steps"].back()["rank_step_s"].size(), 4u);
}

TEST(RunRecord, NamesThatAreNotUtf8AreReplaced) {
  PlanRecord p = Plan();
  p.ranks[0].node = std::string("n\xff", 2);
  const std::string line = ToJsonLine(p);
  Result<RunHistory> h = ParseRunLog(line + "\n", "s.jsonl");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->plans[0].ranks[0].node, "n\xEF\xBF\xBD");  // U+FFFD
}

}  // namespace
}  // namespace loom
