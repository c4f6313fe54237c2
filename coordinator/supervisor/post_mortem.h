// Post-mortems (docs/FAULTS.md): when an incarnation fails or is restarted, `loom launch` writes
// what the coordinator holds of every rank (its last complete steps' calls, its last beat) and
// the detector's settings and verdict into a directory; `loom trace show DIR` reads it back,
// replays the detector over it and prints the per-rank timeline around the failure. The
// coordinator holds every rank's evidence, so a rank that was killed or stopped is in it too.
#pragma once

#include <string>
#include <vector>

#include "coordinator/service/job_state.h"
#include "core/status.h"
#include "fault/detector/detector.h"
#include "proto/control.pb.h"

namespace loom {

struct PostMortem {
  proto::PostMortemJob job;
  std::vector<proto::RankPostMortem> ranks;  // by world rank
};

// What `state` holds, at `now`, with the detector's settings `c` (null: none ran).
PostMortem CollectPostMortem(const JobState& state, int epoch, const detect::DetectorConfig* c,
                             const std::string& failure, const std::string& verdict, double now);

// Writes job.json and rank_NNNNN.json into `dir` (created; each file written whole, then
// renamed into place).
Status WritePostMortem(const std::string& dir, const PostMortem& pm);
// Reads a directory WritePostMortem wrote; errors name the file and what was wrong.
Result<PostMortem> ReadPostMortem(const std::string& dir);

// The detector replayed over `pm`: its steps in order, then the last beats at the time of
// writing. The verdicts, in the order they came.
std::vector<detect::Verdict> Replay(const PostMortem& pm);
// The per-rank timeline around the failure and the verdicts, for people.
std::string DescribePostMortem(const PostMortem& pm);

}  // namespace loom
