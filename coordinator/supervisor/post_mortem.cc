// Post-mortems: collected from the job state, written and read as JSON, replayed, described.
#include "coordinator/supervisor/post_mortem.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "coordinator/supervisor/anomaly_watch.h"
#include "core/file_util.h"

namespace loom {
namespace {

constexpr uint64_t kMaxFileBytes = 256ull << 20;

std::string JoinPath(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

std::string RankFile(int rank) {
  char name[32];
  std::snprintf(name, sizeof(name), "rank_%05d.json", rank);
  return name;
}

Layout LayoutOf(const proto::LayoutSpec& s) {
  Layout l;
  l.tp = std::max(1, s.tp());
  l.cp = std::max(1, s.cp());
  l.pp = std::max(1, s.pp());
  l.vpp = std::max(1, s.vpp());
  l.dp = std::max(1, s.dp());
  l.zero = s.zero();
  l.sp = s.sp();
  l.first_stage_layers = s.first_stage_layers();
  l.last_stage_layers = s.last_stage_layers();
  return l;
}

detect::DetectorConfig ConfigOf(const proto::PostMortemJob& j) {
  detect::DetectorConfig c =
      DetectorConfigFor(LayoutOf(j.layout()), {j.rank_node().begin(), j.rank_node().end()},
                        {j.node_names().begin(), j.node_names().end()});
  if (j.slow_rank_score() > 0) c.slow_rank_score = j.slow_rank_score();
  if (j.slow_link_factor() > 0) c.slow_link_factor = j.slow_link_factor();
  if (j.persist() > 0) c.persist = j.persist();
  if (j.hang_s() > 0) c.hang_min_s = j.hang_s();
  if (j.stale_s() > 0) c.stale_s = j.stale_s();
  return c;
}

Status WriteJson(const std::string& path, const google::protobuf::Message& m) {
  std::string json;
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  const auto st = google::protobuf::util::MessageToJsonString(m, &json, o);
  if (!st.ok()) return Internal(path + ": " + std::string(st.message()));
  // Not flushed: the launcher writes it between a verdict and the restart (file_util.h).
  return WriteFileReplace(path, json);
}

Status ReadJson(const std::string& path, google::protobuf::Message* m) {
  LOOM_ASSIGN_OR_RETURN(const std::string text, ReadRegularFile(path, kMaxFileBytes));
  const auto st = google::protobuf::util::JsonStringToMessage(text, m);
  if (!st.ok()) {
    return InvalidArgument(path + ": expected a post-mortem " + m->GetTypeName() + " (" +
                           std::string(st.message()) + ")");
  }
  return Status::Ok();
}

std::string Ms(int64_t ns, int64_t origin) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f", static_cast<double>(ns - origin) * 1e-6);
  return b;
}

}  // namespace

PostMortem CollectPostMortem(const JobState& state, int epoch, const detect::DetectorConfig* c,
                             const std::string& failure, const std::string& verdict, double now) {
  PostMortem pm;
  proto::PostMortemJob& j = pm.job;
  const JobSpec& spec = state.spec();
  j.set_epoch(epoch);
  proto::LayoutSpec& l = *j.mutable_layout();
  l.set_tp(spec.layout.tp);
  l.set_cp(spec.layout.cp);
  l.set_pp(spec.layout.pp);
  l.set_vpp(spec.layout.vpp);
  l.set_dp(spec.layout.dp);
  l.set_zero(spec.layout.zero);
  l.set_sp(spec.layout.sp);
  l.set_first_stage_layers(spec.layout.first_stage_layers);
  l.set_last_stage_layers(spec.layout.last_stage_layers);
  j.set_now_s(now);
  j.set_failure(failure);
  j.set_verdict(verdict);
  if (c != nullptr) {
    for (int n : c->rank_node) j.add_rank_node(n);
    for (const std::string& n : c->node_names) j.add_node_names(n);
    j.set_slow_rank_score(c->slow_rank_score);
    j.set_slow_link_factor(c->slow_link_factor);
    j.set_persist(c->persist);
    j.set_hang_s(c->hang_min_s);
    j.set_stale_s(c->stale_s);
  } else {
    for (int n : spec.node) j.add_rank_node(n);
  }
  const int world = spec.layout.world();
  pm.ranks.resize(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) pm.ranks[r].set_rank(r);
  for (const CompleteStep& s : state.CompleteSince(0)) {
    for (const proto::StepReport& rep : s.reports) {
      if (rep.rank() >= 0 && rep.rank() < world) *pm.ranks[rep.rank()].add_steps() = rep;
    }
  }
  const std::vector<LiveBeat> beats = state.Beats();
  const std::vector<RankStatus> ranks = state.Ranks();
  for (int r = 0; r < world && r < static_cast<int>(beats.size()); ++r) {
    *pm.ranks[r].mutable_beat() = beats[r].beat;
    double heard = beats[r].received_s;  // any message is a sign of life
    if (r < static_cast<int>(ranks.size()) && ranks[r].registered) {
      heard = std::max(heard, ranks[r].last_contact);
    }
    pm.ranks[r].set_beat_received_s(heard);
  }
  return pm;
}

Status WritePostMortem(const std::string& dir, const PostMortem& pm) {
  LOOM_RETURN_IF_ERROR(MakeDirs(dir));
  for (const proto::RankPostMortem& r : pm.ranks) {
    LOOM_RETURN_IF_ERROR(WriteJson(JoinPath(dir, RankFile(r.rank())), r));
  }
  // Last: a directory with job.json is complete.
  return WriteJson(JoinPath(dir, "job.json"), pm.job);
}

Result<PostMortem> ReadPostMortem(const std::string& dir) {
  PostMortem pm;
  const std::string job = JoinPath(dir, "job.json");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(job, ec)) {
    return NotFound(dir +
                    ": no post-mortem here (expected job.json, written by loom launch when "
                    "a job fails)");
  }
  LOOM_RETURN_IF_ERROR(ReadJson(job, &pm.job));
  const int world = LayoutOf(pm.job.layout()).world();
  for (int r = 0; r < world; ++r) {
    proto::RankPostMortem rank;
    LOOM_RETURN_IF_ERROR(ReadJson(JoinPath(dir, RankFile(r)), &rank));
    if (rank.rank() != r) {
      return InvalidArgument(JoinPath(dir, RankFile(r)) + ": field 'rank': expected " +
                             std::to_string(r) + ", got " + std::to_string(rank.rank()));
    }
    pm.ranks.push_back(std::move(rank));
  }
  return pm;
}

std::vector<detect::Verdict> Replay(const PostMortem& pm) {
  detect::Detector d(ConfigOf(pm.job));
  std::map<int64_t, std::vector<detect::RankStep>> steps;
  std::map<int64_t, double> step_s;
  for (const proto::RankPostMortem& r : pm.ranks) {
    for (const proto::StepReport& s : r.steps()) {
      if (!s.has_evidence()) continue;
      steps[s.step()].push_back(EvidenceOf(s, &d));
      step_s[s.step()] = std::max(step_s[s.step()], s.step_s());
    }
  }
  std::vector<detect::Verdict> out;
  std::vector<double> times;
  for (const auto& [step, ranks] : steps) {
    times.push_back(step_s[step]);
    if (static_cast<int>(ranks.size()) != static_cast<int>(pm.ranks.size())) continue;
    for (detect::Verdict& v : d.OnStep(ranks)) out.push_back(std::move(v));
  }
  if (!times.empty()) {
    std::vector<detect::Beat> beats;
    for (const proto::RankPostMortem& r : pm.ranks) {
      beats.push_back(BeatOf(r.rank(), LiveBeat{r.beat(), r.beat_received_s()}));
    }
    const std::vector<double> recent(times.end() - std::min<long>(16, times.size()), times.end());
    if (auto h = d.OnBeats(beats, pm.job.now_s(), detect::MedianOf(recent))) {
      out.push_back(std::move(*h));
    }
  }
  return out;
}

std::string DescribePostMortem(const PostMortem& pm) {
  const proto::PostMortemJob& j = pm.job;
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line), "post-mortem of incarnation %d (written at %.1f s)\n",
                j.epoch(), j.now_s());
  out += line;
  if (!j.failure().empty()) out += "  ended: " + j.failure() + "\n";
  auto node_of = [&](int r) -> std::string {
    if (r >= j.rank_node_size()) return "?";
    const int n = j.rank_node(r);
    return n < j.node_names_size() ? j.node_names(n) : "node " + std::to_string(n);
  };
  // The timeline's origin: the start of the newest step any rank completed.
  int64_t origin = 0, newest = 0;
  for (const proto::RankPostMortem& r : pm.ranks) {
    if (r.steps_size() == 0) continue;
    const proto::StepReport& s = r.steps(r.steps_size() - 1);
    if (s.step() > newest) {
      newest = s.step();
      origin = s.evidence().start_ns();
    }
  }
  out += "  rank  node        last step  at the end\n";
  for (const proto::RankPostMortem& r : pm.ranks) {
    std::string state;
    const proto::Heartbeat& b = r.beat();
    if (r.beat_received_s() < 0) {
      state = "never sent a beat";
    } else {
      std::snprintf(line, sizeof(line), "last beat %.1f s before, ",
                    j.now_s() - r.beat_received_s());
      state = line;
      if (b.has_blocked()) {
        std::snprintf(line, sizeof(line), "blocked %.1f s in %s #%llu on %s@%d",
                      j.now_s() - static_cast<double>(b.blocked().since_ns()) * 1e-9,
                      b.blocked().op().c_str(), static_cast<unsigned long long>(b.blocked().seq()),
                      b.blocked().group().c_str(), b.blocked().root());
        state += line;
      } else {
        state += b.checkpoint_io() ? "in checkpoint I/O" : "computing";
      }
    }
    const int64_t last = r.steps_size() ? r.steps(r.steps_size() - 1).step() : 0;
    std::snprintf(line, sizeof(line), "  %4d  %-10s  %9lld  %s\n", r.rank(),
                  node_of(r.rank()).c_str(),
                  static_cast<long long>(std::max<int64_t>(last, b.step())), state.c_str());
    out += line;
  }
  if (newest > 0) {
    std::snprintf(line, sizeof(line),
                  "  step %lld, each rank's calls (ms from the step's start: enter-exit):\n",
                  static_cast<long long>(newest));
    out += line;
    for (const proto::RankPostMortem& r : pm.ranks) {
      std::string calls;
      for (const proto::StepReport& s : r.steps()) {
        if (s.step() != newest) continue;
        const proto::StepEvidence& ev = s.evidence();
        const int n = ev.calls_size();
        for (int i = std::max(0, n - 6); i < n; ++i) {
          const proto::TraceCall& c = ev.calls(i);
          const std::string group =
              c.group() < ev.groups_size()
                  ? ev.groups(c.group()).name() + "@" + std::to_string(ev.groups(c.group()).root())
                  : "?";
          calls += " | " + c.op() + " " + group + " #" + std::to_string(c.seq()) + " " +
                   Ms(c.enter_ns(), origin) + "-" +
                   (c.exit_ns() ? Ms(c.exit_ns(), origin) : std::string("(never)"));
        }
        std::snprintf(line, sizeof(line), "    rank %d: compute %.1f ms%s%s\n", r.rank(),
                      static_cast<double>(ev.compute_ns()) * 1e-6, n > 6 ? " | ..." : "",
                      calls.c_str());
        out += line;
      }
    }
  }
  const std::vector<detect::Verdict> v = Replay(pm);
  if (v.empty()) {
    out += "  detector (replayed): nothing named\n";
  }
  for (const detect::Verdict& x : v) {
    out += "  detector (replayed): " + std::string(detect::AnomalyKindName(x.kind)) + ": " +
           x.line + "\n";
  }
  if (!j.verdict().empty()) out += "  detector (live): " + j.verdict() + "\n";
  return out;
}

}  // namespace loom
