// What the coordinator knows about one running job, as pure logic (no sockets, no clocks of its
// own; times are passed in): who registered, each rank's plan, the latest heartbeat and step of
// every rank, completed steps (every rank reported), and how each rank finished. The service
// feeds it messages; `loom launch` reads its progress. Thread-safe (one mutex).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "parallel/layout.h"
#include "proto/control.pb.h"

namespace loom {

// Everything needed to hand each rank its part.
struct JobSpec {
  std::string token;
  Layout layout;
  std::string schedule;       // pipeline schedule name ("" when pp = 1)
  std::string job_yaml;       // the job's text with the layout written into `parallel:`
  std::string job_path;       // the original file (relative paths are resolved against it)
  std::string job_file_text;  // the job file as read (for checkpoint provenance)
  std::vector<std::string> override_args;  // the flags with their values ("--steps 500")
  int64_t steps = 0;
  int64_t tokens_per_step = 0;
  std::string precision = "fp32";  // what the workers train in: fp32 | bf16 (job `precision`)
  std::vector<int> node, device;   // per world rank (empty: node 0, device = rank)
  // Per world rank: its node's share of its host's cores, of core_shares (logical nodes of CPU
  // devices sharing one host split its cores, core/affinity.h); core_shares 0: not split.
  std::vector<int> core_share, core_shares;
  double predicted_step_s = 0;
  double flops_per_step = 0;  // model FLOPs of one step, all ranks together
  double peak_flops = 0;      // per device
  int heartbeat_ms = 2000;
  bool detect = false;  // the workers send their calls and live beats (docs/FAULTS.md)
  std::optional<proto::SnapshotPlan> snapshot;  // in-memory snapshots (absent: none)
  int epoch = 0;                                // this incarnation (0, then +1 per restart)
};

struct RankStatus {
  bool registered = false;
  std::string host;
  int pid = 0;
  double last_contact = 0;  // seconds, the caller's clock
  // When it sent its latest message, on the same clock by its own estimate (-1: not known).
  double last_sent = -1;
  int64_t step = 0;      // last step this rank said it completed (reports or heartbeats)
  int64_t reported = 0;  // last step it sent a report for
  bool done = false, ok = false;
  int stopped_by = 0;  // the signal it stopped on after saving step `step` (checkpoint.signal)
  bool checkpoint_io = false;  // its latest heartbeat said it was loading or saving a checkpoint
  std::string error;
  bool peer_failure = false;  // its error came from a peer (a communication deadline passed)
};

struct Progress {
  int world = 0, registered = 0, done = 0, failed = 0;
  int64_t step = 0;  // last step every rank has reported
  double loss = 0, step_s = 0, tokens_per_s = 0, mfu = 0;
  double eta_s = 0;
  std::optional<proto::Done> final;  // rank 0's Done, once received
  // In-memory snapshots: the newest step every rank has committed, and the largest image.
  int64_t snapshot_step = 0;
  int64_t snapshot_bytes = 0;
  // What this incarnation restored from, as rank 0 said in its first report ("" until then).
  std::string restored_from;
  int64_t restored_step = 0;
  double restore_s = 0;
};

// Progress and every rank's status at one moment (what the supervisor reads).
struct JobSnapshot {
  Progress progress;
  std::vector<RankStatus> ranks;  // by world rank
};

// A fresh job token: 32 hex digits from the system's random source.
std::string NewJobToken();

// A rank's latest heartbeat and when it came (the caller's clock; -1: none yet).
struct LiveBeat {
  proto::Heartbeat beat;
  double received_s = -1;
};

// A step every rank reported, with their reports by rank.
struct CompleteStep {
  int64_t step = 0;
  std::vector<proto::StepReport> reports;
};

// Of `ranks`, those registered and unfinished but not heard from for more than `timeout_s`
// (`now` and their last_contact on one clock).
std::vector<int> SilentRanks(const std::vector<RankStatus>& ranks, double now, double timeout_s);

class JobState {
 public:
  explicit JobState(JobSpec spec);

  const JobSpec& spec() const { return spec_; }
  // A worker introduces itself; its plan, or an error (rank out of range, another world size, a
  // rank registered twice by different processes).
  Result<proto::Plan> Register(const proto::RegisterRequest& req, double now);
  Status Heartbeat(const proto::Heartbeat& hb, double now);
  Status Report(const proto::StepReport& report, double now);
  Status Done(const proto::Done& done, double now);
  // A message from registered rank `rank` was sent at `sent_s` (the caller's clock).
  void Spoke(int rank, double sent_s);

  Progress GetProgress() const;
  std::vector<RankStatus> Ranks() const;
  JobSnapshot Snapshot() const;  // both, consistent
  // Registered, unfinished ranks not heard from for more than `timeout_s`.
  std::vector<int> Silent(double now, double timeout_s) const;
  // Per-step collective summaries of the latest complete step, by rank (for the detector).
  std::vector<proto::StepReport> LatestReports() const;
  // The complete steps after `step` still kept (the newest kKeptSteps), oldest first.
  static constexpr int kKeptSteps = 32;
  std::vector<CompleteStep> CompleteSince(int64_t step) const;
  // Every rank's latest heartbeat, by world rank.
  std::vector<LiveBeat> Beats() const;
  // From now on every acknowledgement tells the worker to stop, for `why` (the first reason
  // stays).
  void RequestStop(const std::string& why);
  std::string stop_requested() const;

 private:
  Status CheckRank(int rank, const char* what) const;
  Progress ProgressLocked() const;  // mu_ held

  const JobSpec spec_;
  mutable std::mutex mu_;
  std::vector<RankStatus> ranks_;  // GUARDED_BY(mu_)
  // step -> reports by rank, until every rank has reported it; GUARDED_BY(mu_)
  std::map<int64_t, std::map<int, proto::StepReport>> pending_;
  int64_t complete_step_ = 0;                       // GUARDED_BY(mu_)
  double loss_ = 0, step_s_ = 0;                    // GUARDED_BY(mu_)
  int64_t snapshot_step_ = 0, snapshot_bytes_ = 0;  // GUARDED_BY(mu_)
  std::string restored_from_;                       // GUARDED_BY(mu_)
  int64_t restored_step_ = 0;                       // GUARDED_BY(mu_)
  double restore_s_ = 0;                            // GUARDED_BY(mu_)
  std::vector<proto::StepReport> latest_;           // GUARDED_BY(mu_)
  std::deque<CompleteStep> kept_;                   // GUARDED_BY(mu_)
  std::vector<LiveBeat> beats_;                     // GUARDED_BY(mu_)
  std::string stop_;                                // GUARDED_BY(mu_)
  std::optional<proto::Done> final_;                // GUARDED_BY(mu_)
};

}  // namespace loom
