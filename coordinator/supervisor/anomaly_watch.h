// The anomaly detector (fault/detector) fed from what the coordinator receives: the calls of
// every complete step (StepReport.evidence) and each rank's latest beat (JobState). Pure: the
// caller passes the time. Not thread-safe (the supervision loop's).
#pragma once

#include <cstdint>
#include <vector>

#include "coordinator/service/job_state.h"
#include "fault/detector/detector.h"

namespace loom {

// The detector's settings for a job: peer classes (pipeline stages), nodes by rank.
detect::DetectorConfig DetectorConfigFor(const Layout& layout, const std::vector<int>& rank_node,
                                         const std::vector<std::string>& node_names);

// One rank's evidence of a step in the detector's terms; the groups it describes are added to
// `detector` (may be null).
detect::RankStep EvidenceOf(const proto::StepReport& report, detect::Detector* detector);
// A rank's beat in the detector's terms (times in seconds on the coordinator's clock).
detect::Beat BeatOf(int rank, const LiveBeat& beat);

class AnomalyWatch {
 public:
  explicit AnomalyWatch(detect::DetectorConfig config) : detector_(std::move(config)) {}

  // The steps completed since the last call, then the beats at `now`: new verdicts. Hangs are
  // looked for only once a step has completed (before, the supervisor's stall rule holds).
  std::vector<detect::Verdict> Observe(const JobState& job, double now);

  const detect::Detector& detector() const { return detector_; }
  double median_step_s() const;

 private:
  detect::Detector detector_;
  int64_t seen_ = 0;
  std::vector<double> step_s_;  // recent complete steps' times
};

}  // namespace loom
