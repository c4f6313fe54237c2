// How a launched job ended, read from its ranks' status (pure functions): the text that names
// the failed, silent and lagging ranks in the supervisor's failures, and whether every rank
// stopped together on a signal after saving.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/service/job_state.h"

namespace loom {

// Why the job failed, from what the ranks said (or did not say): a line per failed rank
// ("\n  rank 2 (host, pid 7) failed after step 5: <its error>") and one naming the ranks that
// ended without reporting, at most 8 of them ("\n  ranks 1, 3 ended without reporting (...)").
// Empty when every rank finished well.
std::string DescribeFailure(const std::vector<RankStatus>& ranks);

// The ranks at the lowest step (`ranks` not empty).
std::vector<int> Laggards(const std::vector<RankStatus>& ranks);
// "; furthest behind at step 4: rank 1 (host, pid 7), 3 (host, pid 9)", for a stalled job.
std::string DescribeLaggards(const std::vector<RankStatus>& ranks);

// The signal every rank stopped on after saving the same step (checkpoint.signal, or
// kStopTimeLimit), with that step in *step; 0 when any rank finished, failed or is still
// running, or they disagree.
int StoppedBySignal(const std::vector<RankStatus>& ranks, int64_t* step);

}  // namespace loom
