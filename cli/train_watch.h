// The anomaly detector for `loom train` under mpirun (no launcher, no coordinator of its own):
// rank 0 serves a coordinator for the job's evidence only, every rank reports its calls and
// beats to it, and rank 0 runs the detector (docs/FAULTS.md). A hang is named once, by rank 0,
// in one line; every other rank's waits then end with an error saying it was stopped because
// of it (instead of each one's deadline message). Slow ranks and links are named, not acted on.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "comm/backend.h"
#include "coordinator/service/job_state.h"
#include "coordinator/service/service.h"
#include "job/job_config.h"
#include "parallel/layout.h"
#include "worker/coordinator_client.h"
#include "worker/coordinator_reporter.h"

namespace loom {

class TrainWatch {
 public:
  // Collective over the world: rank 0 starts the service and the detector, and sends its address
  // to the others; every rank registers. `backend` must outlive the watch.
  static Result<std::unique_ptr<TrainWatch>> Start(const JobConfig& job, const Layout& layout,
                                                   Backend* backend);
  // Stops the detector (rank 0: after the others have had time to hear a stop it requested).
  ~TrainWatch();

  StepObserver* reporter() { return reporter_.get(); }
  // After training succeeded on every rank (collective): the last reports are sent, then rank
  // 0's service stops.
  Status Finish(int64_t step);

 private:
  TrainWatch() = default;
  void Watch();  // rank 0's detector thread

  Backend* backend_ = nullptr;
  std::shared_ptr<Communicator> world_;
  DetectConfig config_;
  std::unique_ptr<JobState> state_;              // rank 0
  std::unique_ptr<CoordinatorService> service_;  // rank 0
  std::unique_ptr<CoordinatorClient> client_;
  std::unique_ptr<CoordinatorReporter> reporter_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
};

}  // namespace loom
