// The coordinator's HTTP endpoint and series file.
#include "coordinator/metrics/metrics_service.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "coordinator/metrics/status_routes.h"
#include "core/logging.h"

namespace loom {

std::string SeriesPath(const std::string& run_dir) {
  return (std::filesystem::path(run_dir) / "series.jsonl").string();
}

Result<std::unique_ptr<MetricsService>> MetricsService::Start(
    const MetricsServiceOptions& options) {
  std::unique_ptr<MetricsService> s(new MetricsService());
  if (!options.run_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.run_dir, ec);
    if (ec) {
      return IoError("metrics.run_dir '" + options.run_dir +
                     "': cannot create it: " + ec.message());
    }
    s->series_path_ = SeriesPath(options.run_dir);
    s->series_ = std::fopen(s->series_path_.c_str(), "a");
    if (s->series_ == nullptr) {
      return IoError("metrics.run_dir: cannot open '" + s->series_path_ +
                     "' for appending: " + std::strerror(errno));
    }
  }
  MetricsService* self = s.get();
  StatusSource source;
  source.view = [self](size_t max_steps) { return self->metrics_.ViewJson(max_steps); };
  source.metrics = &self->metrics_;
  LOOM_ASSIGN_OR_RETURN(s->http_, HttpServer::Start(options.address, options.port,
                                                    [source](const std::string& target) {
                                                      return ServeStatus(source, target);
                                                    }));
  return s;
}

MetricsService::~MetricsService() {
  if (http_) http_->Stop();
  if (series_ != nullptr) std::fclose(series_);
}

void MetricsService::Append(const std::string& line) {
  if (series_ == nullptr || write_failed_) return;
  // One line per record, flushed: a run killed at any point leaves whole lines but the last.
  if (std::fputs(line.c_str(), series_) < 0 || std::fputc('\n', series_) == EOF ||
      std::fflush(series_) != 0) {
    write_failed_ = true;
    LOOM_LOG(WARN, COORD) << "could not write the series file " << series_path_ << ": "
                          << std::strerror(errno) << " (no more records are kept there)";
  }
}

void MetricsService::SetPlan(const PlanRecord& plan, double flops_per_step, double peak_flops) {
  metrics_.SetPlan(plan, flops_per_step, peak_flops);
  Append(ToJsonLine(plan));
}

size_t MetricsService::Observe(const JobState& job, const std::vector<double>& scores, double now) {
  const std::vector<StepRecord> steps = metrics_.Observe(job, scores, now);
  for (const StepRecord& s : steps) Append(ToJsonLine(s));
  return steps.size();
}

void MetricsService::Event(const std::string& kind, const std::string& text, int64_t step,
                           double now) {
  Append(ToJsonLine(metrics_.Event(kind, text, step, now)));
}

}  // namespace loom
