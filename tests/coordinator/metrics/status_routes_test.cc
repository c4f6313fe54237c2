// The status page's routes: the page carries the run's records (and nothing that would end its
// script early), the JSON honours ?steps=, Chart.js is built in, /metrics only while a job runs.
#include "coordinator/metrics/status_routes.h"

#include <gtest/gtest.h>

#include "coordinator/metrics/job_metrics.h"

namespace loom {
namespace {

StatusSource Source(size_t* asked) {
  StatusSource s;
  s.view = [asked](size_t max_steps) {
    *asked = max_steps;
    return std::string(R"({"live":false,"text":"</script><b>"})");
  };
  return s;
}

TEST(StatusRoutes, PageCarriesTheRecords) {
  size_t asked = 0;
  const HttpReply r = ServeStatus(Source(&asked), "/");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_NE(r.body.find(R"(window.LOOM_RUN = {"live":false,"text":"<\/script><b>"};)"),
            std::string::npos);
  EXPECT_EQ(r.body.find("/*LOOM_RUN*/"), std::string::npos);
  EXPECT_NE(r.body.find("<script src=\"/chart.js\">"), std::string::npos);
  EXPECT_GT(asked, 0u);
}

TEST(StatusRoutes, RunJsonTakesAStepCount) {
  size_t asked = 0;
  HttpReply r = ServeStatus(Source(&asked), "/api/run.json?steps=25");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(asked, 25u);
  r = ServeStatus(Source(&asked), "/api/run.json?x=1&steps=7");
  EXPECT_EQ(asked, 7u);
  r = ServeStatus(Source(&asked), "/api/run.json?steps=many");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("steps"), std::string::npos);
}

TEST(StatusRoutes, ChartJsIsBuiltIn) {
  size_t asked = 0;
  const HttpReply r = ServeStatus(Source(&asked), "/chart.js");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("Chart.js v"), std::string::npos);
  EXPECT_GT(r.body.size(), 100000u);  // the whole library, not a stub
}

TEST(StatusRoutes, MetricsOnlyWithAJob) {
  size_t asked = 0;
  StatusSource s = Source(&asked);
  EXPECT_EQ(ServeStatus(s, "/metrics").status, 404);
  JobMetrics m;
  s.metrics = &m;
  const HttpReply r = ServeStatus(s, "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.content_type.find("version=0.0.4"), std::string::npos);
  EXPECT_NE(r.body.find("# TYPE loom_steps_total counter"), std::string::npos);
  EXPECT_EQ(ServeStatus(s, "/nothing").status, 404);
}

}  // namespace
}  // namespace loom
