// The C4-style anomaly detector (docs/FAULTS.md), pure code: no clocks, sockets or output.
// Collectives in a synchronous job are periodic and homogeneous, so a deviation points at a
// machine or a link:
//   slow rank  per step, each rank's compute time (the step not blocked on communication)
//              against the median of the other ranks doing the same work (its peer class, e.g.
//              its pipeline stage; of those, the ones whose compute is pinned to the same CPUs,
//              when there are any: ranks sharing cores share what slows them): its straggler
//              score. A rank scoring >= slow_rank_score for `persist` consecutive steps is slow.
//              (Its peers wait for it, so their compute is normal and their waits long: the
//              score tells the culprit from the victims.)
//   slow link  per step, every send matched with its receive (the k-th send from A to B with a
//              tag is the k-th receive at B from A with that tag): the transfer time is the
//              receive's exit minus the later of the two entries, per byte. Per stream (a link's
//              messages of one size, at least two a step) its floor, the fastest transfer of
//              the last `link_window` steps (waiting to be scheduled only adds time, so the
//              minimum is the link's own speed; after `link_warmup` more steps than the
//              ranks' warm-up). A link whose floor is slow_link_factor x the
//              median floor of its class (inside a node, between nodes; same message size) for
//              `persist` steps is slow; when every
//              observed link leaving a node (a row of the node matrix) or entering it (a column)
//              is slow, and there are at least two, the node's NIC is named instead.
//   hang       live, from the beats: a rank blocked on a call for longer than the hang limit
//              (max(hang_min_s, hang_steps x the median step)) waits for the members that have
//              not issued that call; the wait-for chain is followed to its end: a rank that
//              stopped sending beats (stale_s, by when its latest message was sent, against the
//              other ranks': stopped, or its machine gone; nothing is judged while the
//              coordinator has read nothing for stale_s), one computing
//              (hung in compute, after compute_hang_s), or a call every member is inside with
//              one of them stale (stopped inside it), else stuck in communication.
// Alarms are edge-triggered: a verdict once per onset (the state must clear, below the release
// thresholds, before the same culprit is named again). Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fault/detector/evidence.h"

namespace loom::detect {

struct DetectorConfig {
  int world = 0;
  // Ranks that do the same work share a class (the pipeline stage); empty: all alike.
  std::vector<int> peer_class;
  std::vector<int> rank_node;           // node index by world rank (empty: one node)
  std::vector<std::string> node_names;  // by node index (for the lines)
  double slow_rank_score = 1.4, slow_rank_release = 1.2;
  double slow_link_factor = 1.5, slow_link_release = 1.25;
  int persist = 3;      // consecutive steps
  int link_window = 6;  // steps whose fastest transfer is a link's floor
  int warmup = 3;       // the first steps seen (allocation, first touches) are not judged
  // Links: transfers of this many more steps are left out. The first transfers of a job (or of a
  // restarted incarnation) are slowed unevenly by connection setup and first touches of its
  // buffers: measured up to 4x between healthy links on the development VM (docs/FAULTS.md).
  int link_warmup = 6;
  int64_t min_link_bytes = 16 * 1024;     // smaller transfers measure latency, not the link
  double hang_min_s = 2, hang_steps = 2;  // blocked this long: look for the culprit
  double stale_s = 2;                     // no beat for this long: the rank is not running
  // Computing while others wait this long: hung. Longer than the communication deadline's
  // default (30 s), which names such a hang first.
  double compute_hang_s = 60;
};

enum class AnomalyKind { kHang, kSlowRank, kSlowLink, kSlowNode };
const char* AnomalyKindName(AnomalyKind k);  // "hang", "slow rank", "slow link", "slow node"

struct Verdict {
  AnomalyKind kind = AnomalyKind::kHang;
  int rank = -1;            // hang, slow rank: the culprit
  int src = -1, dst = -1;   // slow link: its ranks
  int node = -1;            // the node to isolate (slow node: the node named)
  bool in_compute = false;  // hang: hung in compute (else in communication)
  bool stopped = false;     // hang: the rank stopped sending beats
  std::string op, group;    // hang: the call (the culprit's or the one waited on)
  uint64_t seq = 0;
  std::vector<int> waiting;  // hang: ranks waiting for it
  double score = 0;          // slow rank: straggler score; slow link: factor
  int64_t step = 0;          // the step it was decided on (hang: last complete)
  std::string line;          // one line for people, naming the culprit
};

class Detector {
 public:
  explicit Detector(DetectorConfig config);

  // A group instance's members (from the ranks' reports). Without it, a group's members are
  // taken to be the ranks whose beats show calls on it.
  void AddGroup(const GroupInfo& g);

  // One complete step, every rank's evidence (any order). New alarms (slow rank, slow link or
  // node) decided at this step.
  std::vector<Verdict> OnStep(const std::vector<RankStep>& step);

  // The beats at `now` (coordinator clock), one per world rank (by rank); `step_s` the median
  // step time so far (0: none yet). A hang, once per onset.
  std::optional<Verdict> OnBeats(const std::vector<Beat>& beats, double now, double step_s);

  const DetectorConfig& config() const { return c_; }
  // The latest straggler score per rank (1: like its peers; 0 before the first step).
  const std::vector<double>& scores() const { return scores_; }
  // The latest slow-link factor per (src, dst) observed, as src * world + dst (0: unobserved).
  const std::vector<double>& link_factors() const { return link_factors_; }

 private:
  std::vector<Verdict> SlowRanks(const std::vector<RankStep>& step);
  std::vector<Verdict> SlowLinks(const std::vector<RankStep>& step);
  int NodeOf(int rank) const;
  std::string NodeName(int node) const;
  std::string RankName(int rank) const;  // "rank 5 (st2)"
  std::vector<int> Members(const std::string& group, const std::vector<Beat>& beats) const;

  const DetectorConfig c_;
  std::map<std::string, std::vector<int>> groups_;  // by group key
  std::vector<double> scores_;
  std::vector<int> slow_run_;  // consecutive slow steps, by rank
  std::vector<bool> rank_alarmed_;
  std::vector<double> link_factors_;
  std::vector<int> link_run_;  // by src * world + dst
  std::vector<bool> link_alarmed_;
  std::map<std::pair<int, int64_t>, std::vector<double>> stream_history_;  // per-step fastest
  bool hang_alarmed_ = false;
  int steps_seen_ = 0;
};

// The median (the mean of the middle two for an even count); 0 for none.
double MedianOf(std::vector<double> v);

}  // namespace loom::detect
