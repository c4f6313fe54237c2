// The disk-space estimate for a run's checkpoints.
#include "worker/space_warning.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "checkpoint/format.h"
#include "core/logging.h"
#include "model/layout.h"
#include "parallel/param_layout.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// How many checkpoints of this run exist at once at most, from `start_step` on.
int64_t SavesAtOnce(const JobConfig& job, int64_t start_step) {
  const CheckpointConfig& c = job.checkpoint;
  const int64_t steps = job.steps;
  // The saves from here on: every `every` steps, and the final one unless it is one of them.
  int64_t saves = c.every > 0 ? steps / c.every - start_step / c.every : 0;
  if (c.final && steps > start_step && (c.every == 0 || steps % c.every != 0)) ++saves;
  if (c.keep > 0) {
    // Retention leaves `keep` (the next one is written before the oldest goes), counting those
    // already there, plus the milestones (keep_every), never deleted.
    const int64_t there = static_cast<int64_t>(ListCheckpoints(c.dir).size());
    int64_t milestones = 0;
    if (c.keep_every > 0 && c.every > 0) {
      const int64_t l = std::lcm(c.every, c.keep_every);
      milestones = steps / l - start_step / l;
    }
    saves = std::min(saves, std::max<int64_t>(1, c.keep + 1 - there) + milestones);
  }
  return saves;
}

// Free bytes on the file system of `dir` (or of its nearest existing parent: the directory is
// made at the first save); negative when unknown.
double FreeBytes(const std::string& dir) {
  fs::path at = fs::absolute(dir);
  std::error_code ec;
  while (!fs::exists(at, ec) && at.has_parent_path() && at != at.parent_path()) {
    at = at.parent_path();
  }
  struct statvfs sv {};
  if (::statvfs(at.c_str(), &sv) != 0) return -1;
  return static_cast<double>(sv.f_bavail) * static_cast<double>(sv.f_frsize);
}

}  // namespace

void WarnIfShortOfSpace(const JobConfig& job, int64_t start_step) {
  const CheckpointConfig& c = job.checkpoint;
  const int64_t saves = SavesAtOnce(job, start_step);
  if (saves <= 0) return;
  // 12 bytes per parameter (fp32 weight, Adam m and v); the index (metadata.json) is not counted.
  const double per_save = 12.0 * static_cast<double>(ModelLayout(job.model, 1).total);
  const double free = FreeBytes(c.dir);
  if (free < 0 || free >= per_save * static_cast<double>(saves)) return;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "checkpoint.dir %s: %.1f MB free, but this run's saves need about %.1f MB "
                "(%lld checkpoints of %.1f MB at once%s); a save that finds the disk full "
                "fails the job",
                c.dir.c_str(), free / 1e6, per_save * static_cast<double>(saves) / 1e6,
                static_cast<long long>(saves), per_save / 1e6,
                c.keep > 0 ? ": the next one is written before the oldest is deleted"
                           : "; keep is 0, none is deleted");
  LOOM_LOG(WARN, CKPT) << buf;
}

}  // namespace loom
