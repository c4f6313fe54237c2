// The job's metrics from synthetic step reports of 8 ranks (tp 2, pp 2, dp 2): every exported
// family present and no other, the step-time histogram, throughput and MFU, per-dimension
// communication, a slow rank's straggler score, anomalies and restarts counted; the text a
// scrape gets.
#include "coordinator/metrics/job_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <set>

namespace loom {
namespace {

JobSpec Spec() {
  JobSpec s;
  s.token = "t";
  s.layout.tp = 2;
  s.layout.pp = 2;
  s.layout.dp = 2;
  s.job_yaml = "steps: 50\n";
  s.steps = 50;
  s.tokens_per_step = 4096;
  s.precision = "bf16";
  s.node = {0, 0, 0, 0, 1, 1, 1, 1};
  s.device = {0, 1, 2, 3, 0, 1, 2, 3};
  s.flops_per_step = 8e12;
  s.peak_flops = 1e12;
  return s;
}

class JobMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int r = 0; r < 8; ++r) {
      proto::RegisterRequest req;
      req.set_rank(r);
      req.set_world_size(8);
      req.set_host("h");
      req.set_pid(100 + r);
      ASSERT_TRUE(job_.Register(req, 0).ok());
    }
    metrics_.SetPlan(PlanRecordOf(job_.spec(), {"n0", "n1"}, {"gpu-a", "gpu-b"}, "job.yaml", 0),
                     job_.spec().flops_per_step, job_.spec().peak_flops);
  }

  // Step `s` on every rank: `slow` computes `factor` times longer and the others wait for it.
  void Step(int64_t s, double step_s, int slow = -1, double factor = 1) {
    for (int r = 0; r < 8; ++r) {
      proto::StepReport rep;
      rep.set_rank(r);
      rep.set_step(s);
      rep.set_loss(4.0 - 0.01 * static_cast<double>(s));
      rep.set_step_s(step_s);
      const double compute = r == slow ? 0.5 * step_s * factor : 0.5 * step_s;
      proto::CollectiveSummary& tp = *rep.add_collectives();
      tp.set_op("all_reduce");
      tp.set_group("tp");
      tp.set_count(4);
      tp.set_busy_s(0.2 * step_s);
      tp.set_wait_s(std::max(0.0, step_s - compute) * 0.5);
      proto::CollectiveSummary& dp = *rep.add_collectives();
      dp.set_op("reduce_scatter");
      dp.set_group("dp");
      dp.set_count(1);
      dp.set_busy_s(0.1 * step_s);
      dp.set_wait_s(std::max(0.0, step_s - compute) * 0.5);
      proto::MemoryUse& m = *rep.add_memory();
      m.set_category("params");
      m.set_bytes(1000 + r);
      m.set_peak_bytes(2000 + r);
      rep.set_snapshot_step(s - 1);
      rep.set_snapshot_s(0.01);
      rep.set_checkpoint_step(s >= 10 ? 10 : 0);
      rep.set_checkpoint_s(s >= 10 ? 0.5 : 0);
      ASSERT_TRUE(job_.Report(rep, static_cast<double>(s)).ok());
    }
  }

  // The family `name` of a scrape (fails the test when absent).
  prometheus::MetricFamily FamilyOf(const std::string& name) {
    for (prometheus::MetricFamily& f : metrics_.Collect()) {
      if (f.name == name) return f;
    }
    ADD_FAILURE() << "no family " << name;
    return {};
  }
  double Value(const std::string& name) {
    const prometheus::MetricFamily f = FamilyOf(name);
    if (f.metric.size() != 1) {
      ADD_FAILURE() << name << " has " << f.metric.size() << " series";
      return 0;
    }
    return f.type == prometheus::MetricType::Counter ? f.metric[0].counter.value
                                                     : f.metric[0].gauge.value;
  }
  // The value of `name`'s series whose label `key` is `value`.
  double ValueWhere(const std::string& name, const std::string& key, const std::string& value) {
    for (const prometheus::ClientMetric& m : FamilyOf(name).metric) {
      for (const auto& l : m.label) {
        if (l.name == key && l.value == value) return m.gauge.value + m.counter.value;
      }
    }
    ADD_FAILURE() << name << " has no series with " << key << "=" << value;
    return 0;
  }

  JobState job_{Spec()};
  JobMetrics metrics_;
};

TEST_F(JobMetricsTest, EveryExportedFamilyAndNoOther) {
  Step(1, 0.2);
  metrics_.Observe(job_, {}, 1);
  std::set<std::string> got;
  for (const prometheus::MetricFamily& f : metrics_.Collect()) {
    EXPECT_TRUE(got.insert(f.name).second) << "twice: " << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    EXPECT_EQ(f.name.rfind("loom_", 0), 0u) << f.name;
    if (f.type == prometheus::MetricType::Counter) {
      EXPECT_TRUE(f.name.size() > 6 && f.name.substr(f.name.size() - 6) == "_total") << f.name;
    }
    EXPECT_FALSE(f.metric.empty()) << f.name << " has no series";
  }
  const std::vector<std::string>& names = ExportedMetricNames();
  EXPECT_EQ(got, std::set<std::string>(names.begin(), names.end()));
}

TEST_F(JobMetricsTest, StepsThroughputAndHistogram) {
  const std::vector<double> times = {0.004, 0.2, 0.2, 0.3, 3.0};
  for (size_t i = 0; i < times.size(); ++i) Step(static_cast<int64_t>(i + 1), times[i]);
  const std::vector<StepRecord> recs = metrics_.Observe(job_, {}, 5);
  ASSERT_EQ(recs.size(), 5u);
  EXPECT_EQ(recs[4].step, 5);
  EXPECT_DOUBLE_EQ(recs[4].tokens_per_s, 4096 / 3.0);
  EXPECT_DOUBLE_EQ(recs[4].mfu, 8e12 / 3.0 / (1e12 * 8));
  EXPECT_EQ(metrics_.Observe(job_, {}, 6).size(), 0u);  // nothing new
  EXPECT_DOUBLE_EQ(Value("loom_step"), 5);
  EXPECT_DOUBLE_EQ(Value("loom_steps_total"), 5);
  EXPECT_DOUBLE_EQ(Value("loom_tokens_total"), 5 * 4096);
  EXPECT_DOUBLE_EQ(Value("loom_tokens_per_second"), 4096 / 3.0);
  EXPECT_NEAR(Value("loom_loss"), 3.95, 1e-12);
  const prometheus::MetricFamily h = FamilyOf("loom_step_seconds");
  ASSERT_EQ(h.metric.size(), 1u);
  const prometheus::ClientMetric::Histogram& hist = h.metric[0].histogram;
  EXPECT_EQ(hist.sample_count, 5u);
  EXPECT_NEAR(hist.sample_sum, 3.704, 1e-12);
  // Cumulative: le=0.005 holds the 4 ms step, le=0.25 the two 0.2 s, le=0.5 the 0.3 s, le=5 all.
  std::map<double, uint64_t> le;
  for (const auto& b : hist.bucket) le[b.upper_bound] = b.cumulative_count;
  EXPECT_EQ(le[0.005], 1u);
  EXPECT_EQ(le[0.1], 1u);
  EXPECT_EQ(le[0.25], 3u);
  EXPECT_EQ(le[0.5], 4u);
  EXPECT_EQ(le[2.5], 4u);
  EXPECT_EQ(le[5], 5u);
  EXPECT_EQ(le[std::numeric_limits<double>::infinity()], 5u);
}

TEST_F(JobMetricsTest, CommunicationMemoryAndSaves) {
  Step(9, 0.5);
  Step(10, 0.5);
  metrics_.Observe(job_, {}, 10);
  // 8 ranks x 2 steps x 0.2 x 0.5 s busy on tp.
  EXPECT_NEAR(ValueWhere("loom_communication_seconds_total", "dim", "tp"), 1.6, 1e-12);
  EXPECT_NEAR(ValueWhere("loom_communication_seconds_total", "dim", "dp"), 0.8, 1e-12);
  EXPECT_NEAR(ValueWhere("loom_exposed_communication_seconds_total", "dim", "tp"), 16 * 0.125,
              1e-12);
  EXPECT_NEAR(Value("loom_exposed_communication_ratio"), 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(ValueWhere("loom_memory_bytes", "rank", "7"), 1007);
  EXPECT_DOUBLE_EQ(ValueWhere("loom_memory_peak_bytes", "category", "params"), 2007);  // rank 7's
  EXPECT_DOUBLE_EQ(Value("loom_snapshot_step"), 9);
  EXPECT_DOUBLE_EQ(Value("loom_checkpoint_step"), 10);
  EXPECT_DOUBLE_EQ(Value("loom_checkpoint_duration_seconds"), 0.5);
  Step(11, 0.5);
  metrics_.Observe(job_, {}, 13.5);
  EXPECT_DOUBLE_EQ(Value("loom_checkpoint_age_seconds"), 3.5);  // stored at 10, seen at 13.5
  EXPECT_DOUBLE_EQ(Value("loom_snapshot_age_seconds"), 0);      // a new one at 13.5
}

TEST_F(JobMetricsTest, LabelsNameHostsAndCoordinates) {
  Step(1, 0.2);
  metrics_.Observe(job_, {}, 1);
  // Rank 5: tp 1, dp 0, pp 1 (tp fastest, then cp, dp, pp), on node n1 = host gpu-b.
  for (const prometheus::ClientMetric& m : FamilyOf("loom_rank_info").metric) {
    std::map<std::string, std::string> l;
    for (const auto& x : m.label) l[x.name] = x.value;
    if (l["rank"] != "5") continue;
    EXPECT_EQ(l["node"], "gpu-b");
    EXPECT_EQ(l["logical_node"], "n1");
    EXPECT_EQ(l["tp"], "1");
    EXPECT_EQ(l["dp"], "0");
    EXPECT_EQ(l["pp"], "1");
    EXPECT_EQ(l["device"], "1");
    return;
  }
  ADD_FAILURE() << "rank 5 missing from loom_rank_info";
}

TEST_F(JobMetricsTest, PlanInfoNamesLayoutAndPrecision) {
  const prometheus::MetricFamily f = FamilyOf("loom_plan_info");
  ASSERT_EQ(f.metric.size(), 1u);
  std::map<std::string, std::string> l;
  for (const auto& x : f.metric[0].label) l[x.name] = x.value;
  EXPECT_EQ(l["tp"], "2");
  EXPECT_EQ(l["pp"], "2");
  EXPECT_EQ(l["precision"], "bf16");
}

TEST_F(JobMetricsTest, SlowRankScoresHighest) {
  for (int64_t s = 1; s <= 3; ++s) Step(s, 0.4, /*slow=*/6, /*factor=*/1.6);
  metrics_.Observe(job_, {}, 3);
  EXPECT_NEAR(ValueWhere("loom_straggler_score", "rank", "6"), 1.6, 1e-9);
  EXPECT_NEAR(ValueWhere("loom_straggler_score", "rank", "1"), 1.0, 1e-9);
  // The detector's scores, when given, are used instead.
  Step(4, 0.4);
  metrics_.Observe(job_, {1, 1, 1, 2.5, 1, 1, 1, 1}, 4);
  EXPECT_DOUBLE_EQ(ValueWhere("loom_straggler_score", "rank", "3"), 2.5);
}

TEST_F(JobMetricsTest, EventsCountAnomaliesRestartsAndLostSteps) {
  metrics_.Event("slow rank", "rank 6 (n1) is slow", 3, 3);
  metrics_.Event("hang", "rank 2 hung", 4, 4);
  metrics_.Event("hang", "rank 2 hung again", 5, 5);
  metrics_.Event("restart", "rank 2 hung", 5, 5);
  metrics_.Recovered(2);
  EXPECT_DOUBLE_EQ(ValueWhere("loom_anomalies_total", "class", "hang"), 2);
  EXPECT_DOUBLE_EQ(ValueWhere("loom_anomalies_total", "class", "slow_rank"), 1);
  EXPECT_DOUBLE_EQ(ValueWhere("loom_anomalies_total", "class", "slow_link"), 0);
  EXPECT_DOUBLE_EQ(Value("loom_restarts_total"), 1);
  EXPECT_DOUBLE_EQ(Value("loom_recoveries_total"), 1);
  EXPECT_DOUBLE_EQ(Value("loom_lost_steps_total"), 2);
  const std::string view = metrics_.ViewJson(10);
  EXPECT_NE(view.find("rank 2 hung again"), std::string::npos);
  EXPECT_NE(view.find("\"status\":\"restarting\""), std::string::npos);
  metrics_.Event("finished", "", 50, 60);
  EXPECT_NE(metrics_.ViewJson(10).find("\"live\":false"), std::string::npos);
}

TEST_F(JobMetricsTest, ScrapeTextHasTheConventionalShape) {
  Step(1, 0.2);
  metrics_.Observe(job_, {}, 1);
  const std::string text = prometheus::TextSerializer().Serialize(metrics_.Collect());
  EXPECT_NE(text.find("# TYPE loom_step_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("loom_step_seconds_bucket{le=\"+Inf\"} 1"), std::string::npos);
  EXPECT_NE(text.find("# TYPE loom_anomalies_total counter"), std::string::npos);
  EXPECT_NE(text.find("loom_tokens_per_second 20480"), std::string::npos);
  // Bounded labels: 8 ranks x 2 dimensions of waits, nothing per step or call.
  size_t waits = 0;
  for (size_t p = text.find("\nloom_rank_communication_wait_seconds{"); p != std::string::npos;
       p = text.find("\nloom_rank_communication_wait_seconds{", p + 1)) {
    ++waits;
  }
  EXPECT_EQ(waits, 16u);
}

TEST_F(JobMetricsTest, ARestartIsANewPlan) {
  Step(1, 0.2);
  metrics_.Observe(job_, {}, 1);
  JobSpec next = Spec();
  next.epoch = 1;
  next.layout.dp = 1;
  next.node = {0, 0, 0, 0};
  JobState second(next);
  metrics_.SetPlan(PlanRecordOf(next, {"n0"}, {"gpu-a"}, "job.yaml", 2), 1, 1);
  EXPECT_DOUBLE_EQ(Value("loom_ranks"), 4);
  EXPECT_DOUBLE_EQ(Value("loom_epoch"), 1);
  EXPECT_DOUBLE_EQ(Value("loom_steps_total"), 1);  // totals carry over
  EXPECT_EQ(FamilyOf("loom_rank_step_seconds").metric.size(), 4u);
}

}  // namespace
}  // namespace loom
