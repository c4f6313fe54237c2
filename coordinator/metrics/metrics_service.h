// What `loom launch` serves and keeps for people watching a job: the job's metrics
// (job_metrics.h) at /metrics and the status page (status_routes.h) on one HTTP port, and the
// run's records appended to RUN_DIR/series.jsonl as they come (run_record.h), for
// `loom dashboard RUN_DIR` afterwards. Writing the series is best effort: a failed write is
// reported once and the job goes on.
//
// Thread-safety: the calls come from the supervision loop's thread; the HTTP thread reads the
// metrics concurrently (JobMetrics is thread-safe).
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/metrics/http_server.h"
#include "coordinator/metrics/job_metrics.h"

namespace loom {

struct MetricsServiceOptions {
  std::string address = "127.0.0.1";
  int port = 0;         // 0: any free port
  std::string run_dir;  // "": the series is not kept
};

// The series file of a run directory.
std::string SeriesPath(const std::string& run_dir);

class MetricsService {
 public:
  // Listens, and opens (creates, or appends to) the series file.
  static Result<std::unique_ptr<MetricsService>> Start(const MetricsServiceOptions& options);
  ~MetricsService();

  void SetPlan(const PlanRecord& plan, double flops_per_step, double peak_flops);
  // New complete steps of `job` (see JobMetrics::Observe); returns how many.
  size_t Observe(const JobState& job, const std::vector<double>& scores, double now);
  void Event(const std::string& kind, const std::string& text, int64_t step, double now);
  void Recovered(int64_t lost_steps) { metrics_.Recovered(lost_steps); }

  std::string url() const { return http_->url(); }
  const std::string& series_path() const { return series_path_; }
  const JobMetrics& metrics() const { return metrics_; }

 private:
  MetricsService() = default;
  void Append(const std::string& line);

  JobMetrics metrics_;
  std::unique_ptr<HttpServer> http_;  // after metrics_: stopped before it goes
  std::string series_path_;
  std::FILE* series_ = nullptr;
  bool write_failed_ = false;
};

}  // namespace loom
