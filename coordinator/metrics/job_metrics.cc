// Aggregation of step reports into the job's metrics.
#include "coordinator/metrics/job_metrics.h"

#include <unistd.h>

#include <algorithm>
#include <limits>

#include "fault/detector/detector.h"

namespace loom {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

MetricFamily Family(const char* name, const char* help, MetricType type) {
  MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

void Add(MetricFamily* f, Labels labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  switch (f->type) {
    case MetricType::Counter:
      m.counter.value = value;
      break;
    case MetricType::Gauge:
      m.gauge.value = value;
      break;
    default:
      m.untyped.value = value;
      break;
  }
  f->metric.push_back(std::move(m));
}

Labels With(Labels base, const char* name, const std::string& value) {
  base.push_back({name, value});
  return base;
}

}  // namespace

const std::vector<double>& StepSecondsBuckets() {
  static const std::vector<double> b = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                        1,     2.5,  5,     10,   25,  60,   120};
  return b;
}

const std::vector<std::string>& ExportedMetricNames() {
  static const std::vector<std::string> names = {
      "loom_plan_info",
      "loom_rank_info",
      "loom_ranks",
      "loom_epoch",
      "loom_step",
      "loom_job_steps",
      "loom_steps_total",
      "loom_tokens_total",
      "loom_loss",
      "loom_tokens_per_second",
      "loom_mfu_ratio",
      "loom_predicted_step_seconds",
      "loom_step_seconds",
      "loom_rank_step_seconds",
      "loom_rank_communication_wait_seconds",
      "loom_straggler_score",
      "loom_communication_seconds_total",
      "loom_exposed_communication_seconds_total",
      "loom_exposed_communication_ratio",
      "loom_memory_bytes",
      "loom_memory_peak_bytes",
      "loom_snapshot_step",
      "loom_snapshot_bytes",
      "loom_snapshot_duration_seconds",
      "loom_snapshot_age_seconds",
      "loom_snapshot_stall_seconds",
      "loom_checkpoint_step",
      "loom_checkpoint_duration_seconds",
      "loom_checkpoint_age_seconds",
      "loom_checkpoint_stall_seconds",
      "loom_anomalies_total",
      "loom_restarts_total",
      "loom_recoveries_total",
      "loom_lost_steps_total",
  };
  return names;
}

PlanRecord PlanRecordOf(const JobSpec& spec, const std::vector<std::string>& node_names,
                        const std::vector<std::string>& node_hosts, const std::string& job,
                        double now) {
  char self[256] = {};
  ::gethostname(self, sizeof(self) - 1);
  PlanRecord p;
  p.epoch = spec.epoch;
  p.t = now;
  p.job = job;
  const Layout& l = spec.layout;
  p.tp = l.tp;
  p.cp = l.cp;
  p.pp = l.pp;
  p.vpp = l.vpp;
  p.dp = l.dp;
  p.zero = l.zero;
  p.schedule = spec.schedule;
  p.steps = spec.steps;
  p.tokens_per_step = spec.tokens_per_step;
  p.precision = spec.precision;
  p.predicted_step_s = spec.predicted_step_s;
  for (int r = 0; r < l.world(); ++r) {
    RankPlace place;
    place.rank = r;
    const auto i = static_cast<size_t>(r);
    const int node = i < spec.node.size() ? spec.node[i] : 0;
    const auto n = static_cast<size_t>(node);
    place.node = node >= 0 && n < node_names.size() ? node_names[n] : "node" + std::to_string(node);
    place.host = node >= 0 && n < node_hosts.size() ? node_hosts[n] : "localhost";
    if (place.host == "localhost" || place.host == "127.0.0.1") place.host = self;
    place.device = i < spec.device.size() ? spec.device[i] : r;
    const Coord c = l.CoordOf(r);
    place.tp = c.tp;
    place.cp = c.cp;
    place.pp = c.pp;
    place.dp = c.dp;
    p.ranks.push_back(std::move(place));
  }
  return p;
}

JobMetrics::JobMetrics(size_t keep_steps)
    : keep_steps_(keep_steps), bucket_counts_(StepSecondsBuckets().size() + 1, 0) {}

void JobMetrics::SetPlan(const PlanRecord& plan, double flops_per_step, double peak_flops) {
  std::lock_guard<std::mutex> lock(mu_);
  plan_ = plan;
  history_.plans.push_back(plan);
  flops_per_step_ = flops_per_step;
  peak_flops_ = peak_flops;
  seen_step_ = 0;
  ranks_.assign(plan.ranks.size(), RankLatest{});
  plan_labels_ = {{"epoch", std::to_string(plan.epoch)},
                  {"tp", std::to_string(plan.tp)},
                  {"cp", std::to_string(plan.cp)},
                  {"pp", std::to_string(plan.pp)},
                  {"vpp", std::to_string(plan.vpp)},
                  {"dp", std::to_string(plan.dp)},
                  {"zero", std::to_string(plan.zero)},
                  {"schedule", plan.schedule.empty() ? "none" : plan.schedule},
                  {"precision", plan.precision}};
  rank_labels_.clear();
  for (const RankPlace& r : plan.ranks) {
    rank_labels_.push_back({{"rank", std::to_string(r.rank)},
                            {"node", r.host},
                            {"tp", std::to_string(r.tp)},
                            {"cp", std::to_string(r.cp)},
                            {"pp", std::to_string(r.pp)},
                            {"dp", std::to_string(r.dp)}});
  }
  status_ = "running";
}

std::vector<StepRecord> JobMetrics::Observe(const JobState& job, const std::vector<double>& scores,
                                            double now) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::vector<CompleteStep> steps = job.CompleteSince(seen_step_);
  std::vector<StepRecord> out;
  now_ = now;
  const size_t world = ranks_.size();
  const int64_t tokens_per_step = plan_.tokens_per_step;
  for (const CompleteStep& cs : steps) {
    if (cs.step <= seen_step_) continue;
    seen_step_ = cs.step;
    StepRecord rec;
    rec.step = cs.step;
    rec.epoch = plan_.epoch;
    rec.t = now;
    rec.rank_step_s.assign(world, 0);
    rec.rank_wait_s.assign(world, 0);
    std::vector<double> compute(world, 0);
    int64_t snapshot_step = -1;
    int64_t checkpoint_step = -1;
    for (const proto::StepReport& r : cs.reports) {
      const auto i = static_cast<size_t>(r.rank());
      if (i >= world) continue;
      if (r.rank() == 0) rec.loss = r.loss();
      rec.step_s = std::max(rec.step_s, r.step_s());
      rec.rank_step_s[i] = r.step_s();
      RankLatest& rl = ranks_[i];
      rl.step_s = r.step_s();
      rl.wait_s.clear();
      double waited = 0;
      for (const proto::CollectiveSummary& c : r.collectives()) {
        rec.comm_s[c.group()] += c.busy_s();
        rec.exposed_s[c.group()] += c.wait_s();
        rl.wait_s[c.group()] += c.wait_s();
        waited += c.wait_s();
      }
      rec.rank_wait_s[i] = waited;
      rl.compute_s = std::max(0.0, r.step_s() - waited);
      compute[i] = rl.compute_s;
      rl.memory.clear();
      for (const proto::MemoryUse& m : r.memory()) {
        rl.memory.push_back({m.category(), {m.bytes(), m.peak_bytes()}});
      }
      snapshot_step =
          snapshot_step < 0 ? r.snapshot_step() : std::min(snapshot_step, r.snapshot_step());
      checkpoint_step = checkpoint_step < 0 ? r.checkpoint_step()
                                            : std::min(checkpoint_step, r.checkpoint_step());
      snapshot_bytes_ = std::max(snapshot_bytes_, r.snapshot_bytes());
      snapshot_s_ = std::max(snapshot_s_, r.snapshot_s());
      checkpoint_s_ = std::max(checkpoint_s_, r.checkpoint_s());
      snapshot_stall_s_ = std::max(snapshot_stall_s_, r.snapshot_stall_s());
      checkpoint_stall_s_ = std::max(checkpoint_stall_s_, r.checkpoint_stall_s());
    }
    rec.snapshot_step = std::max<int64_t>(0, snapshot_step);
    rec.checkpoint_step = std::max<int64_t>(0, checkpoint_step);
    if (rec.snapshot_step > last_.snapshot_step) snapshot_at_ = now;
    if (rec.checkpoint_step > last_.checkpoint_step) checkpoint_at_ = now;
    if (rec.step_s > 0) {
      rec.tokens_per_s = static_cast<double>(tokens_per_step) / rec.step_s;
      if (peak_flops_ > 0 && world > 0) {
        rec.mfu = flops_per_step_ / rec.step_s / (peak_flops_ * static_cast<double>(world));
      }
    }
    // Straggler scores: the detector's when it runs, else compute time against the median of
    // the rank's pipeline stage (its peers do the same work).
    const bool detector = scores.size() == world &&
                          std::any_of(scores.begin(), scores.end(), [](double s) { return s > 0; });
    std::map<int, std::vector<double>> by_stage;
    for (size_t i = 0; i < world; ++i) by_stage[plan_.ranks[i].pp].push_back(compute[i]);
    std::map<int, double> stage_median;
    for (auto& [stage, v] : by_stage) stage_median[stage] = detect::MedianOf(v);
    for (size_t i = 0; i < world; ++i) {
      const double med = stage_median[plan_.ranks[i].pp];
      ranks_[i].score = detector ? scores[i] : (med > 0 ? compute[i] / med : 1.0);
    }
    // Totals.
    ++steps_total_;
    tokens_total_ += tokens_per_step;
    const std::vector<double>& b = StepSecondsBuckets();
    bucket_counts_[static_cast<size_t>(std::lower_bound(b.begin(), b.end(), rec.step_s) -
                                       b.begin())]++;
    ++step_count_;
    step_sum_ += rec.step_s;
    for (const auto& [dim, s] : rec.comm_s) comm_total_[dim] += s;
    for (const auto& [dim, s] : rec.exposed_s) exposed_total_[dim] += s;
    last_ = rec;
    history_.steps.push_back(rec);
    out.push_back(std::move(rec));
  }
  if (history_.steps.size() > keep_steps_ + keep_steps_ / 4) {  // trimmed in batches
    history_.steps.erase(history_.steps.begin(),
                         history_.steps.end() - static_cast<std::ptrdiff_t>(keep_steps_));
  }
  return out;
}

EventRecord JobMetrics::Event(const std::string& kind, const std::string& text, int64_t step,
                              double now) {
  std::lock_guard<std::mutex> lock(mu_);
  EventRecord e{now, step, plan_.epoch, kind, text};
  if (kind == "hang" || kind == "slow rank" || kind == "slow link" || kind == "slow node") {
    ++anomalies_[kind];
  } else if (kind == "restart") {
    ++restarts_;
    status_ = "restarting";
  } else if (EndsRun(kind)) {
    status_ = kind;
  }
  history_.events.push_back(e);
  return e;
}

void JobMetrics::Recovered(int64_t lost_steps) {
  std::lock_guard<std::mutex> lock(mu_);
  ++recoveries_;
  lost_steps_ += lost_steps;
}

void JobMetrics::SetStatus(const std::string& status) {
  std::lock_guard<std::mutex> lock(mu_);
  status_ = status;
}

std::string JobMetrics::ViewJson(size_t max_steps) const {
  std::lock_guard<std::mutex> lock(mu_);
  const bool live = status_ == "starting" || status_ == "running" || status_ == "restarting";
  return HistoryJson(history_, live, status_, max_steps);
}

std::vector<MetricFamily> JobMetrics::Collect() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<MetricFamily> out;
  auto gauge = [&](const char* name, const char* help, double v) {
    MetricFamily f = Family(name, help, MetricType::Gauge);
    Add(&f, {}, v);
    out.push_back(std::move(f));
  };
  auto counter = [&](const char* name, const char* help, double v) {
    MetricFamily f = Family(name, help, MetricType::Counter);
    Add(&f, {}, v);
    out.push_back(std::move(f));
  };
  {
    MetricFamily f =
        Family("loom_plan_info", "The layout of the running incarnation", MetricType::Gauge);
    Add(&f, plan_labels_, 1);
    out.push_back(std::move(f));
  }
  {
    MetricFamily f = Family("loom_rank_info", "Where each rank runs (node, device, coordinates)",
                            MetricType::Gauge);
    for (size_t i = 0; i < rank_labels_.size(); ++i) {
      Add(&f,
          With(With(rank_labels_[i], "device", std::to_string(plan_.ranks[i].device)),
               "logical_node", plan_.ranks[i].node),
          1);
    }
    out.push_back(std::move(f));
  }
  gauge("loom_ranks", "Ranks of the running incarnation", static_cast<double>(ranks_.size()));
  gauge("loom_epoch", "Incarnation of the job (0, then one more per restart)", plan_.epoch);
  gauge("loom_step", "Last step every rank completed", static_cast<double>(last_.step));
  gauge("loom_job_steps", "Steps the job trains", static_cast<double>(plan_.steps));
  counter("loom_steps_total", "Steps completed (steps computed again after a restart count again)",
          static_cast<double>(steps_total_));
  counter("loom_tokens_total", "Tokens trained on", static_cast<double>(tokens_total_));
  gauge("loom_loss", "Training loss of the last complete step", last_.loss);
  gauge("loom_tokens_per_second", "Throughput of the last complete step", last_.tokens_per_s);
  gauge("loom_mfu_ratio", "Model FLOPs utilisation of the last complete step (0-1)", last_.mfu);
  gauge("loom_predicted_step_seconds", "The planner's predicted step time (0: none)",
        plan_.predicted_step_s);
  {
    MetricFamily f =
        Family("loom_step_seconds", "Step time (the slowest rank's)", MetricType::Histogram);
    ClientMetric m;
    m.histogram.sample_count = step_count_;
    m.histogram.sample_sum = step_sum_;
    const std::vector<double>& b = StepSecondsBuckets();
    uint64_t cumulative = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      cumulative += bucket_counts_[i];
      m.histogram.bucket.push_back({cumulative, b[i]});
    }
    m.histogram.bucket.push_back({step_count_, std::numeric_limits<double>::infinity()});
    f.metric.push_back(std::move(m));
    out.push_back(std::move(f));
  }
  MetricFamily rank_step =
      Family("loom_rank_step_seconds", "Each rank's last step time", MetricType::Gauge);
  MetricFamily rank_wait = Family("loom_rank_communication_wait_seconds",
                                  "Time each rank was blocked on communication in its last step, "
                                  "per dimension",
                                  MetricType::Gauge);
  MetricFamily score = Family("loom_straggler_score",
                              "Each rank's compute time against its peers' median (1: like them)",
                              MetricType::Gauge);
  MetricFamily mem =
      Family("loom_memory_bytes", "Tracked memory per rank and category", MetricType::Gauge);
  // Peaks per category over the ranks only: per rank they would double the series a scrape of a
  // large job serialises (most of its cost), for a figure that matters as the largest rank's.
  MetricFamily peak =
      Family("loom_memory_peak_bytes", "Peak tracked memory per category, the largest rank's",
             MetricType::Gauge);
  std::map<std::string, int64_t> peaks;
  for (size_t i = 0; i < ranks_.size() && i < rank_labels_.size(); ++i) {
    const RankLatest& r = ranks_[i];
    Add(&rank_step, rank_labels_[i], r.step_s);
    Add(&score, rank_labels_[i], r.score);
    for (const auto& [dim, s] : r.wait_s) Add(&rank_wait, With(rank_labels_[i], "dim", dim), s);
    for (const auto& [cat, use] : r.memory) {
      Add(&mem, With(rank_labels_[i], "category", cat), static_cast<double>(use.first));
      int64_t& p = peaks[cat];
      p = std::max(p, use.second);
    }
  }
  for (const auto& [cat, p] : peaks) Add(&peak, {{"category", cat}}, static_cast<double>(p));
  out.push_back(std::move(rank_step));
  out.push_back(std::move(rank_wait));
  out.push_back(std::move(score));
  MetricFamily comm = Family("loom_communication_seconds_total",
                             "Time collectives and transfers ran, summed over ranks, per dimension",
                             MetricType::Counter);
  MetricFamily exposed =
      Family("loom_exposed_communication_seconds_total",
             "Time ranks were blocked on communication (not hidden behind compute), summed over "
             "ranks, per dimension",
             MetricType::Counter);
  for (const auto& [dim, s] : comm_total_) Add(&comm, {{"dim", dim}}, s);
  for (const auto& [dim, s] : exposed_total_) Add(&exposed, {{"dim", dim}}, s);
  out.push_back(std::move(comm));
  out.push_back(std::move(exposed));
  double exposed_sum = 0;
  for (const auto& [dim, s] : last_.exposed_s) exposed_sum += s;
  const double rank_seconds = last_.step_s * static_cast<double>(ranks_.size());
  gauge("loom_exposed_communication_ratio",
        "Share of the last step's rank time blocked on communication (0-1)",
        rank_seconds > 0 ? std::min(1.0, exposed_sum / rank_seconds) : 0);
  out.push_back(std::move(mem));
  out.push_back(std::move(peak));
  gauge("loom_snapshot_step", "Newest in-memory snapshot every rank committed (0: none)",
        static_cast<double>(last_.snapshot_step));
  gauge("loom_snapshot_bytes", "Largest rank's snapshot image",
        static_cast<double>(snapshot_bytes_));
  gauge("loom_snapshot_duration_seconds",
        "Time the newest snapshot took until every rank stored it", snapshot_s_);
  gauge("loom_snapshot_age_seconds", "Time since the newest snapshot was committed (0: none)",
        snapshot_at_ >= 0 ? now_ - snapshot_at_ : 0);
  gauge("loom_snapshot_stall_seconds", "Time the training loop was blocked by snapshots so far",
        snapshot_stall_s_);
  gauge("loom_checkpoint_step", "Newest checkpoint every rank stored (0: none)",
        static_cast<double>(last_.checkpoint_step));
  gauge("loom_checkpoint_duration_seconds",
        "Time the newest checkpoint took until every rank stored it", checkpoint_s_);
  gauge("loom_checkpoint_age_seconds", "Time since the newest checkpoint was stored (0: none)",
        checkpoint_at_ >= 0 ? now_ - checkpoint_at_ : 0);
  gauge("loom_checkpoint_stall_seconds", "Time the training loop was blocked by checkpoints so far",
        checkpoint_stall_s_);
  {
    MetricFamily f = Family("loom_anomalies_total", "Anomalies the detector named, by class",
                            MetricType::Counter);
    for (const char* c : {"hang", "slow rank", "slow link", "slow node"}) {
      auto it = anomalies_.find(c);
      std::string label = c;
      std::replace(label.begin(), label.end(), ' ', '_');
      Add(&f, {{"class", label}}, it == anomalies_.end() ? 0 : static_cast<double>(it->second));
    }
    out.push_back(std::move(f));
  }
  counter("loom_restarts_total", "Restarts of the job from its snapshots",
          static_cast<double>(restarts_));
  counter("loom_recoveries_total", "Restarts that trained again", static_cast<double>(recoveries_));
  counter("loom_lost_steps_total", "Steps computed again after restarts",
          static_cast<double>(lost_steps_));
  return out;
}

}  // namespace loom
