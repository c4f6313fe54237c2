// The whole job's Prometheus metrics, aggregated by the coordinator from every rank's step
// reports (docs/OBSERVABILITY.md lists them). Names follow Prometheus conventions: the `loom_`
// prefix, base units in the name (`_seconds`, `_bytes`), `_total` for counters, `_ratio` for
// fractions 0-1, `_info` for the plan. Labels are bounded: rank, node (the host name, as DCGM's
// exporter names it), tp/cp/pp/dp coordinates, a dimension, a memory category or an anomaly
// class; never a step or a call. The `node` label is the host name, as DCGM's exporter's
// `Hostname`, so that the two join; loom_rank_info also names the manifest's node.
//
// Pure aggregation: fed a JobState and the time by the caller (the supervision loop), read by a
// scrape (Collect) or the status page (ViewJson) from any thread. Thread-safe (one mutex); a
// scrape costs a copy of the latest values, not of the history.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "coordinator/metrics/run_record.h"
#include "coordinator/service/job_state.h"

namespace loom {

// The plan of `spec` for the records: nodes named by `node_names` on hosts `node_hosts` (by
// node index; "localhost" stands for this host, by its name).
PlanRecord PlanRecordOf(const JobSpec& spec, const std::vector<std::string>& node_names,
                        const std::vector<std::string>& node_hosts, const std::string& job,
                        double now);

// Upper bounds of the step-time histogram's buckets, in seconds.
const std::vector<double>& StepSecondsBuckets();

// Every metric family the coordinator exports (the dashboard may name only these).
const std::vector<std::string>& ExportedMetricNames();

class JobMetrics : public prometheus::Collectable {
 public:
  // `keep_steps`: step records kept for the status page (the newest).
  explicit JobMetrics(size_t keep_steps = 20000);

  // A new incarnation (the first, or a restart): its plan, the model FLOPs of one step and the
  // peak FLOP/s of a device (for MFU; 0: unknown).
  void SetPlan(const PlanRecord& plan, double flops_per_step, double peak_flops);
  // The steps `job` completed since the last call, as records (also kept for the page).
  // `scores`: the anomaly detector's straggler score per rank (empty: computed here from the
  // ranks' compute time against their pipeline stage's median).
  std::vector<StepRecord> Observe(const JobState& job, const std::vector<double>& scores,
                                  double now);
  // Something happened (see EventRecord::kind); detector classes count as anomalies,
  // "restart" as a restart. Returns the record.
  EventRecord Event(const std::string& kind, const std::string& text, int64_t step, double now);
  // A restart's first step came: `lost_steps` steps had to be computed again.
  void Recovered(int64_t lost_steps);
  // "running", "finished", "failed", "stopped", "restarting".
  void SetStatus(const std::string& status);

  // The page's document (run_record.h HistoryJson) with the newest `max_steps` steps.
  std::string ViewJson(size_t max_steps) const;
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct RankLatest {
    double step_s = 0, compute_s = 0, score = 0;
    std::map<std::string, double> wait_s;  // per dimension, the latest step
    std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> memory;  // (now, peak)
  };

  mutable std::mutex mu_;
  const size_t keep_steps_;
  RunHistory history_;                                                     // GUARDED_BY(mu_)
  std::string status_ = "starting";                                        // GUARDED_BY(mu_)
  PlanRecord plan_;                                                        // GUARDED_BY(mu_)
  std::vector<prometheus::ClientMetric::Label> plan_labels_;               // GUARDED_BY(mu_)
  std::vector<std::vector<prometheus::ClientMetric::Label>> rank_labels_;  // by rank
  double flops_per_step_ = 0, peak_flops_ = 0;
  int64_t seen_step_ = 0;
  std::vector<RankLatest> ranks_;
  // Totals over the whole launch (every incarnation).
  int64_t steps_total_ = 0, tokens_total_ = 0;
  std::vector<uint64_t> bucket_counts_;  // per StepSecondsBuckets(), not cumulative
  uint64_t step_count_ = 0;
  double step_sum_ = 0;
  std::map<std::string, double> comm_total_, exposed_total_;
  std::map<std::string, int64_t> anomalies_;
  int64_t restarts_ = 0, recoveries_ = 0, lost_steps_ = 0;
  // The latest complete step.
  StepRecord last_;
  int64_t snapshot_bytes_ = 0;
  double snapshot_s_ = 0, checkpoint_s_ = 0, snapshot_stall_s_ = 0, checkpoint_stall_s_ = 0;
  double snapshot_at_ = -1, checkpoint_at_ = -1;  // when the newest was first seen (-1: none)
  double now_ = 0;
};

}  // namespace loom
