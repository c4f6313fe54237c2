// The shipped deploy/grafana/loom.json and deploy/prometheus/prometheus.yml: valid, and every
// metric the dashboard's expressions name is one the coordinator exports (a renamed metric must
// not leave an empty panel behind).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "coordinator/metrics/job_metrics.h"

namespace loom {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every "expr" under `j`.
void Expressions(const nlohmann::json& j, std::vector<std::string>* out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "expr" && it->is_string()) out->push_back(it->get<std::string>());
      Expressions(*it, out);
    }
  } else if (j.is_array()) {
    for (const auto& e : j) Expressions(e, out);
  }
}

// The metric family a series name belongs to (histograms' _bucket, _sum and _count).
std::string FamilyOf(const std::string& name, const std::set<std::string>& families) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
        families.count(name.substr(0, name.size() - s.size())) > 0) {
      return name.substr(0, name.size() - s.size());
    }
  }
  return name;
}

TEST(DeployFiles, DashboardNamesOnlyExportedMetrics) {
  const std::string path = std::string(LOOM_SOURCE_DIR) + "/deploy/grafana/loom.json";
  const nlohmann::json dash = nlohmann::json::parse(Read(path), nullptr, false);
  ASSERT_FALSE(dash.is_discarded()) << path << " is not valid JSON";
  ASSERT_TRUE(dash.contains("panels"));
  std::vector<std::string> exprs;
  Expressions(dash, &exprs);
  ASSERT_GE(exprs.size(), 20u);
  const std::set<std::string> exported(ExportedMetricNames().begin(), ExportedMetricNames().end());
  const std::regex metric(R"(\b(loom_[a-z0-9_]+|[A-Z][A-Z0-9_]*_[A-Z0-9_]+)\b)");
  std::set<std::string> used;
  for (const std::string& e : exprs) {
    for (auto it = std::sregex_iterator(e.begin(), e.end(), metric); it != std::sregex_iterator();
         ++it) {
      const std::string family = FamilyOf((*it)[1].str(), exported);
      EXPECT_EQ(exported.count(family), 1u) << "'" << family << "' in " << e;
      used.insert(family);
    }
  }
  // The panels the issue asks for are there.
  for (const char* m :
       {"loom_tokens_per_second", "loom_mfu_ratio", "loom_loss", "loom_step_seconds",
        "loom_rank_step_seconds", "loom_communication_seconds_total",
        "loom_rank_communication_wait_seconds", "loom_straggler_score", "loom_snapshot_age_seconds",
        "loom_checkpoint_age_seconds", "loom_restarts_total", "loom_lost_steps_total"}) {
    EXPECT_EQ(used.count(m), 1u) << "the dashboard does not show " << m;
  }
  int heatmaps = 0;
  for (const auto& p : dash["panels"]) heatmaps += p.value("type", "") == "heatmap";
  EXPECT_GE(heatmaps, 2);  // per-rank step time, and the latency matrix
}

TEST(DeployFiles, PrometheusScrapesTheCoordinator) {
  const std::string path = std::string(LOOM_SOURCE_DIR) + "/deploy/prometheus/prometheus.yml";
  YAML::Node y = YAML::LoadFile(path);
  ASSERT_TRUE(y["scrape_configs"].IsSequence());
  bool found = false;
  for (const YAML::Node& c : y["scrape_configs"]) {
    if (c["job_name"].as<std::string>() != "loom") continue;
    found = true;
    EXPECT_EQ(c["metrics_path"].as<std::string>(), "/metrics");
    EXPECT_TRUE(c["static_configs"][0]["targets"].IsSequence());
  }
  EXPECT_TRUE(found) << path << " has no scrape config named loom";
}

}  // namespace
}  // namespace loom
