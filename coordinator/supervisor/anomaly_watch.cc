// The detector fed from the coordinator's job state.
#include "coordinator/supervisor/anomaly_watch.h"

#include <algorithm>

namespace loom {

detect::DetectorConfig DetectorConfigFor(const Layout& layout, const std::vector<int>& rank_node,
                                         const std::vector<std::string>& node_names) {
  detect::DetectorConfig c;
  c.world = layout.world();
  for (int r = 0; r < c.world; ++r) {
    // Ranks of one pipeline stage do the same work; stages differ (embedding, loss).
    c.peer_class.push_back(layout.CoordOf(r).pp);
    c.rank_node.push_back(r < static_cast<int>(rank_node.size()) ? rank_node[r] : 0);
  }
  c.node_names = node_names;
  return c;
}

detect::RankStep EvidenceOf(const proto::StepReport& report, detect::Detector* detector) {
  const proto::StepEvidence& ev = report.evidence();
  detect::RankStep s;
  s.rank = report.rank();
  s.step = report.step();
  s.start_ns = ev.start_ns();
  s.end_ns = ev.end_ns();
  // On CPU ranks the training thread's CPU time: the wall-clock compute of ranks sharing cores
  // mostly measures the scheduler.
  s.compute_ns = ev.compute_cpu_ns() > 0 ? ev.compute_cpu_ns() : ev.compute_ns();
  s.cpus = ev.cpus();
  std::vector<std::string> keys;
  for (const proto::TraceGroupRef& g : ev.groups()) {
    keys.push_back(detect::GroupKey(g.name(), g.root()));
    if (detector != nullptr && g.members_size() > 0) {
      detector->AddGroup({g.name(), {g.members().begin(), g.members().end()}});
    }
  }
  for (const proto::TraceCall& c : ev.calls()) {
    detect::CallEvidence e;
    e.op = c.op();
    e.group = c.group() >= 0 && c.group() < static_cast<int>(keys.size()) ? keys[c.group()] : "?";
    e.seq = c.seq();
    e.enter_ns = c.enter_ns();
    e.exit_ns = c.exit_ns();
    e.bytes = c.bytes();
    e.peer = c.peer();
    e.tag = c.tag();
    s.calls.push_back(std::move(e));
  }
  return s;
}

detect::Beat BeatOf(int rank, const LiveBeat& lb) {
  detect::Beat b;
  b.rank = rank;
  b.received_s = lb.received_s;
  b.step = lb.beat.step();
  b.io = lb.beat.checkpoint_io();
  if (lb.beat.has_blocked()) {
    const proto::LiveCall& c = lb.beat.blocked();
    b.blocked = true;
    b.op = c.op();
    b.group = detect::GroupKey(c.group(), c.root());
    b.seq = c.seq();
    b.peer = c.op() == "send" || c.op() == "recv" ? c.peer() : -1;
    b.blocked_since_s = static_cast<double>(c.since_ns()) * 1e-9;
  }
  for (const proto::IssuedCount& i : lb.beat.issued()) {
    b.issued[detect::GroupKey(i.group(), i.root())] = i.next_seq();
  }
  return b;
}

double AnomalyWatch::median_step_s() const {
  return detect::MedianOf(step_s_);
}

std::vector<detect::Verdict> AnomalyWatch::Observe(const JobState& job, double now) {
  std::vector<detect::Verdict> out;
  const int world = job.spec().layout.world();
  for (const CompleteStep& c : job.CompleteSince(seen_)) {
    seen_ = c.step;
    std::vector<detect::RankStep> steps;
    double step_s = 0;
    for (const proto::StepReport& r : c.reports) {
      step_s = std::max(step_s, r.step_s());
      if (r.has_evidence()) steps.push_back(EvidenceOf(r, &detector_));
    }
    step_s_.push_back(step_s);
    if (step_s_.size() > 16) step_s_.erase(step_s_.begin());
    if (static_cast<int>(steps.size()) != world) continue;
    std::vector<detect::Verdict> v = detector_.OnStep(steps);
    out.insert(out.end(), v.begin(), v.end());
  }
  if (step_s_.empty()) return out;
  const std::vector<LiveBeat> live = job.Beats();
  const std::vector<RankStatus> ranks = job.Ranks();
  std::vector<detect::Beat> beats;
  for (int r = 0; r < static_cast<int>(live.size()); ++r) {
    beats.push_back(BeatOf(r, live[r]));
    // Any message is a sign of life (a rank busy with fast steps reports before it beats).
    if (r < static_cast<int>(ranks.size()) && ranks[r].registered) {
      beats.back().received_s = std::max(beats.back().received_s, ranks[r].last_contact);
      beats.back().sent_s = ranks[r].last_sent;
    }
  }
  if (std::optional<detect::Verdict> h = detector_.OnBeats(beats, now, median_step_s())) {
    out.push_back(std::move(*h));
  }
  return out;
}

}  // namespace loom
