// The calibration `loom launch` plans this machine with when the job runs on the built-in
// localhost manifest and no --calibration is given: measured once per machine, model and rank
// count (`loom calibrate --job` on one rank and on a rank per core, the collectives under
// `mpirun -np <ranks>`), cached, and
// read again on later launches. Uncalibrated, the manifest's nominal figures predict a step
// 35-50 % slow on this VM and order layouts wrongly (docs/PLANNER.md, "Accuracy on this machine").
//
// Cache: $LOOM_CACHE_DIR, else $XDG_CACHE_HOME/loom, else $HOME/.cache/loom; one file per key
// (host name, CPU model, core count, ranks, the model's shape, the data's sequence and
// micro-batch, the precision), written atomically. LOOM_CALIBRATION=none skips all of it (the
// uncalibrated manifest, as before; the test suite sets it so that each launch test does not
// measure); LOOM_CALIBRATION=<file> uses that file.
#pragma once

#include <optional>
#include <string>

#include "coordinator/calibration.h"
#include "core/status.h"
#include "job/job_config.h"

namespace loom {

struct LocalCalibration {
  std::optional<Calibration> calibration;  // none: LOOM_CALIBRATION=none
  std::string path;                        // the file it came from
  bool measured = false;                   // measured now (else read from the cache)
  bool from_env = false;                   // LOOM_CALIBRATION=FILE: that file, not the cache
  double age_s = 0;                        // read from the cache: seconds since it was measured
};

// `loom`: this binary; `job_path`: the job file as given (loom calibrate --job reads it);
// `ranks`: the launch's world. Measuring takes about a minute on 2 cores and is bounded by a
// deadline (an error naming what timed out, nothing cached).
Result<LocalCalibration> LocalhostCalibration(const JobConfig& job, const std::string& job_path,
                                              const std::string& loom, int ranks);

}  // namespace loom
