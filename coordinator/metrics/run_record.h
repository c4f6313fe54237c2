// What a job leaves for people to watch, live and afterwards: the plan of each incarnation, one
// record per complete step and the events (anomalies, restarts, the end). The coordinator keeps
// them in memory for the status page and appends them, one JSON object per line, to the run
// directory's series file; `loom dashboard RUN_DIR` reads that file back into the same records.
// Pure code: formatting and parsing, no files.
//
// Lines (docs/OBSERVABILITY.md): {"kind":"plan",...}, {"kind":"step",...}, {"kind":"event",...}.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace loom {

// Where one rank runs and its coordinates in the layout.
struct RankPlace {
  int rank = 0;
  std::string node;  // the node's name in the cluster manifest
  std::string host;  // its host name (what DCGM's exporter calls Hostname)
  int device = 0;
  int tp = 0, cp = 0, pp = 0, dp = 0;
};

struct PlanRecord {
  int epoch = 0;  // the incarnation (0, then one more per restart)
  double t = 0;   // seconds since the coordinator started
  std::string job;
  int tp = 1, cp = 1, pp = 1, vpp = 1, dp = 1, zero = 0;
  std::string schedule;
  int64_t steps = 0;  // the job's
  int64_t tokens_per_step = 0;
  std::string precision = "fp32";  // fp32 | bf16 (absent in series written before it: fp32)
  double predicted_step_s = 0;
  std::vector<RankPlace> ranks;  // by world rank
};

struct StepRecord {
  int64_t step = 0;
  int epoch = 0;
  double t = 0;  // when the coordinator saw it complete
  double loss = 0;
  double step_s = 0;  // the slowest rank's
  double tokens_per_s = 0;
  double mfu = 0;                           // 0-1 (0: unknown peak)
  std::vector<double> rank_step_s;          // by world rank
  std::vector<double> rank_wait_s;          // by world rank: blocked on communication
  std::map<std::string, double> comm_s;     // per dimension ("tp", "dp", ...): busy, all ranks
  std::map<std::string, double> exposed_s;  // per dimension: callers blocked, all ranks
  int64_t snapshot_step = 0, checkpoint_step = 0;
};

struct EventRecord {
  double t = 0;
  int64_t step = 0;
  int epoch = 0;
  // "hang", "slow rank", "slow link", "slow node" (the detector's), "restart", "recovered",
  // "finished", "failed", "stopped"
  std::string kind;
  std::string text;
};

// Whether an event of `kind` is the run's last word ("finished", "failed", "stopped",
// "interrupted").
bool EndsRun(const std::string& kind);

// A run's records in order of arrival.
struct RunHistory {
  std::vector<PlanRecord> plans;
  std::vector<StepRecord> steps;
  std::vector<EventRecord> events;
};

std::string ToJsonLine(const PlanRecord& r);  // one line, no newline
std::string ToJsonLine(const StepRecord& r);
std::string ToJsonLine(const EventRecord& r);

// Parses a series file's text. Errors name `path`, the line and the field.
Result<RunHistory> ParseRunLog(const std::string& text, const std::string& path);

// The history as one JSON document for the status page: {"live":..,"plan":the latest plan,
// "plans":[...],"steps":[...],"events":[...],"status":status}; `max_steps` keeps the newest
// steps only (0: all), and only the newest kRankedSteps keep their per-rank figures.
inline constexpr size_t kRankedSteps = 120;
std::string HistoryJson(const RunHistory& h, bool live, const std::string& status,
                        size_t max_steps);

}  // namespace loom
