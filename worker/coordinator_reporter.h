// The coordinator's view of a worker's training: after every step, a StepReport (loss, step
// time, memory, and the step's collectives summed per (op, group) from the per-call trace,
// comm/trace.h; and, with the job's anomaly detector on, every call of the step) is queued for
// the coordinator client, which sends it in the background. When the
// coordinator cannot be reached any more, the next step fails instead of training blind.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "comm/backend.h"
#include "comm/trace.h"
#include "worker/coordinator_client.h"
#include "worker/step_observer.h"

namespace loom {

class CoordinatorReporter : public StepObserver {
 public:
  // `client` and `backend` (null for one process) must outlive the reporter; the trace is read
  // from now on.
  CoordinatorReporter(CoordinatorClient* client, int rank, Backend* backend);

  Status OnStart(const RunStart& start) override;
  Status OnStep(const StepEvent& event) override;
  // Rank 0 logs what the evidence cost the training thread per step (DEBUG, COORD).
  Status OnFinish(int64_t steps) override;

  int64_t last_step() const { return last_step_; }  // the last step reported (0: none)
  // The CPUs this rank's compute is pinned to ("0-1"), sent with every step's evidence.
  void set_cpus(std::string cpus) { cpus_ = std::move(cpus); }

 private:
  // The step's calls for the anomaly detector (times on the coordinator's clock).
  void AddEvidence(const TraceRead& read, int64_t end_ns, double step_s, proto::StepReport* r);

  CoordinatorClient* client_;
  int rank_;
  Backend* backend_;
  TraceCursor cursor_;
  int64_t tokens_per_step_ = 0;
  int64_t last_step_ = 0;
  RestoreReport restore_;                            // sent with the first report
  std::set<std::pair<std::string, int>> described_;  // groups whose members were sent
  int64_t last_cpu_ns_ = 0;  // the training thread's CPU time at the previous step's end
  std::string cpus_;
  // The evidence's cost: time building it on the training thread, its bytes, the steps' time.
  int64_t evidence_ns_ = 0, evidence_bytes_ = 0, step_ns_ = 0, evidence_steps_ = 0;
};

}  // namespace loom
