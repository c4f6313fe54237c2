// Job bookkeeping of the coordinator.
#include "coordinator/service/job_state.h"

#include <cstdio>

#include <random>

#include <algorithm>
#include <cmath>

#include "core/stop_signal.h"

namespace loom {

std::string NewJobToken() {
  std::random_device rd;
  char buf[33];
  for (int i = 0; i < 4; ++i) std::snprintf(buf + 8 * i, 9, "%08x", rd());
  return buf;
}

JobState::JobState(JobSpec spec) : spec_(std::move(spec)) {
  ranks_.resize(static_cast<size_t>(spec_.layout.world()));
}

Status JobState::CheckRank(int rank, const char* what) const {
  if (rank < 0 || rank >= spec_.layout.world()) {
    return InvalidArgument(std::string(what) + ": field 'rank': expected 0.." +
                           std::to_string(spec_.layout.world() - 1) + ", got " +
                           std::to_string(rank));
  }
  return Status::Ok();
}

Result<proto::Plan> JobState::Register(const proto::RegisterRequest& req, double now) {
  LOOM_RETURN_IF_ERROR(CheckRank(req.rank(), "register"));
  if (req.world_size() != spec_.layout.world()) {
    return InvalidArgument("register: field 'world_size': the plan has " +
                           std::to_string(spec_.layout.world()) + " ranks, the launcher started " +
                           std::to_string(req.world_size()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  RankStatus& r = ranks_[static_cast<size_t>(req.rank())];
  if (r.registered && (r.pid != req.pid() || r.host != req.host())) {
    return FailedPrecondition("register: rank " + std::to_string(req.rank()) +
                              " is already registered by pid " + std::to_string(r.pid) + " on " +
                              r.host);
  }
  r.registered = true;
  r.host = req.host();
  r.pid = req.pid();
  r.last_contact = now;
  proto::Plan plan;
  const Layout& l = spec_.layout;
  proto::LayoutSpec* ls = plan.mutable_layout();
  ls->set_tp(l.tp);
  ls->set_cp(l.cp);
  ls->set_pp(l.pp);
  ls->set_vpp(l.vpp);
  ls->set_dp(l.dp);
  ls->set_zero(l.zero);
  ls->set_sp(l.sp);
  ls->set_first_stage_layers(l.first_stage_layers);
  ls->set_last_stage_layers(l.last_stage_layers);
  const Coord c = l.CoordOf(req.rank());
  plan.set_rank(req.rank());
  plan.set_tp_rank(c.tp);
  plan.set_cp_rank(c.cp);
  plan.set_dp_rank(c.dp);
  plan.set_pp_rank(c.pp);
  plan.set_schedule(spec_.schedule);
  plan.set_job_yaml(spec_.job_yaml);
  plan.set_job_path(spec_.job_path);
  plan.set_job_file_text(spec_.job_file_text);
  if (spec_.snapshot) *plan.mutable_snapshot() = *spec_.snapshot;
  plan.set_epoch(spec_.epoch);
  for (const std::string& a : spec_.override_args) plan.add_override_args(a);
  const size_t i = static_cast<size_t>(req.rank());
  plan.set_node(i < spec_.node.size() ? spec_.node[i] : 0);
  plan.set_device(i < spec_.device.size() ? spec_.device[i] : req.rank());
  if (i < spec_.core_shares.size() && spec_.core_shares[i] > 1) {
    plan.set_core_share(spec_.core_share[i]);
    plan.set_core_shares(spec_.core_shares[i]);
  }
  plan.set_predicted_step_s(spec_.predicted_step_s);
  plan.set_flops_per_step(spec_.flops_per_step);
  plan.set_peak_flops(spec_.peak_flops);
  plan.set_heartbeat_ms(spec_.heartbeat_ms);
  plan.set_detect(spec_.detect);
  return plan;
}

void JobState::Spoke(int rank, double sent_s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank < 0 || rank >= static_cast<int>(ranks_.size())) return;
  RankStatus& r = ranks_[static_cast<size_t>(rank)];
  r.last_sent = std::max(r.last_sent, sent_s);
}

Status JobState::Heartbeat(const proto::Heartbeat& hb, double now) {
  LOOM_RETURN_IF_ERROR(CheckRank(hb.rank(), "heartbeat"));
  std::lock_guard<std::mutex> lock(mu_);
  RankStatus& r = ranks_[static_cast<size_t>(hb.rank())];
  if (!r.registered) {
    return FailedPrecondition("heartbeat from rank " + std::to_string(hb.rank()) +
                              ", which has not registered");
  }
  r.last_contact = now;
  r.checkpoint_io = hb.checkpoint_io();
  beats_.resize(ranks_.size());
  beats_[static_cast<size_t>(hb.rank())] = {hb, now};
  if (hb.step() >= 0 && (spec_.steps == 0 || hb.step() <= spec_.steps)) {
    r.step = std::max(r.step, hb.step());
  }
  return Status::Ok();
}

Status JobState::Report(const proto::StepReport& report, double now) {
  LOOM_RETURN_IF_ERROR(CheckRank(report.rank(), "step report"));
  std::lock_guard<std::mutex> lock(mu_);
  RankStatus& r = ranks_[static_cast<size_t>(report.rank())];
  if (!r.registered) {
    return FailedPrecondition("step report from rank " + std::to_string(report.rank()) +
                              ", which has not registered");
  }
  const std::string where =
      "step report from rank " + std::to_string(report.rank()) + ": field 'step': ";
  if (report.step() <= r.reported || report.step() <= complete_step_) {
    return InvalidArgument(where + std::to_string(report.step()) + " was already reported");
  }
  if (spec_.steps > 0 && report.step() > spec_.steps) {
    return InvalidArgument(where + std::to_string(report.step()) + " is past the job's " +
                           std::to_string(spec_.steps) + " steps");
  }
  if (!std::isfinite(report.step_s()) || report.step_s() < 0) {
    return InvalidArgument("step report from rank " + std::to_string(report.rank()) +
                           ": field 'step_s': expected a time >= 0");
  }
  r.last_contact = now;
  r.reported = report.step();
  r.step = std::max(r.step, report.step());
  if (report.rank() == 0 && !report.restored_from().empty() && restored_from_.empty()) {
    restored_from_ = report.restored_from();
    restored_step_ = report.restored_step();
    restore_s_ = report.restore_s();
  }
  std::map<int, proto::StepReport>& got = pending_[report.step()];
  got[report.rank()] = report;
  if (static_cast<int>(got.size()) < spec_.layout.world()) return Status::Ok();
  // Every rank finished this step: it is complete.
  complete_step_ = report.step();
  loss_ = 0;
  step_s_ = 0;
  latest_.clear();
  snapshot_step_ = got.begin()->second.snapshot_step();
  snapshot_bytes_ = 0;
  for (const auto& [rank, s] : got) {
    if (rank == 0) loss_ = s.loss();
    step_s_ = std::max(step_s_, s.step_s());
    snapshot_step_ = std::min(snapshot_step_, s.snapshot_step());
    snapshot_bytes_ = std::max(snapshot_bytes_, s.snapshot_bytes());
    latest_.push_back(s);
  }
  kept_.push_back({complete_step_, latest_});
  while (kept_.size() > static_cast<size_t>(kKeptSteps)) kept_.pop_front();
  pending_.erase(pending_.begin(), pending_.upper_bound(complete_step_));
  return Status::Ok();
}

Status JobState::Done(const proto::Done& done, double now) {
  LOOM_RETURN_IF_ERROR(CheckRank(done.rank(), "done"));
  std::lock_guard<std::mutex> lock(mu_);
  RankStatus& r = ranks_[static_cast<size_t>(done.rank())];
  if (!r.registered) {
    return FailedPrecondition("done from rank " + std::to_string(done.rank()) +
                              ", which has not registered");
  }
  if (r.done) {
    return FailedPrecondition("done from rank " + std::to_string(done.rank()) + " again");
  }
  if (done.ok() && spec_.steps > 0 && done.step() != spec_.steps) {
    return InvalidArgument("done from rank " + std::to_string(done.rank()) +
                           ": field 'step': success at step " + std::to_string(done.step()) +
                           ", the job has " + std::to_string(spec_.steps) + " steps");
  }
  // 65: the time limit (proto/control.proto).
  if (done.stopped_by_signal() < 0 || done.stopped_by_signal() > kStopTimeLimit ||
      (done.stopped_by_signal() != 0 && done.ok())) {
    return InvalidArgument("done from rank " + std::to_string(done.rank()) +
                           ": field 'stopped_by_signal': expected 0, or a signal number 1-64 "
                           "or 65 (the time limit) with ok false, got " +
                           std::to_string(done.stopped_by_signal()) +
                           (done.ok() ? " with ok true" : ""));
  }
  r.last_contact = now;
  r.done = true;
  r.ok = done.ok();
  r.stopped_by = done.stopped_by_signal();
  if (r.stopped_by != 0) r.step = done.step();
  r.error = done.error().substr(0, 4096);
  r.peer_failure = !done.ok() && done.peer_failure();
  if (done.rank() == 0) final_ = done;
  return Status::Ok();
}

Progress JobState::GetProgress() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ProgressLocked();
}

Progress JobState::ProgressLocked() const {
  Progress p;
  p.world = spec_.layout.world();
  for (const RankStatus& r : ranks_) {
    p.registered += r.registered;
    p.done += r.done;
    p.failed += r.done && !r.ok;
  }
  p.step = complete_step_;
  p.loss = loss_;
  p.step_s = step_s_;
  if (step_s_ > 0) {
    p.tokens_per_s = static_cast<double>(spec_.tokens_per_step) / step_s_;
    if (spec_.peak_flops > 0) {
      p.mfu = spec_.flops_per_step / step_s_ / (spec_.peak_flops * p.world);
    }
    p.eta_s = step_s_ * static_cast<double>(std::max<int64_t>(0, spec_.steps - complete_step_));
  }
  p.final = final_;
  p.snapshot_step = snapshot_step_;
  p.snapshot_bytes = snapshot_bytes_;
  p.restored_from = restored_from_;
  p.restored_step = restored_step_;
  p.restore_s = restore_s_;
  return p;
}

std::vector<RankStatus> JobState::Ranks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ranks_;
}

JobSnapshot JobState::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return JobSnapshot{ProgressLocked(), ranks_};
}

std::vector<int> SilentRanks(const std::vector<RankStatus>& ranks, double now, double timeout_s) {
  std::vector<int> out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankStatus& r = ranks[i];
    if (r.registered && !r.done && now - r.last_contact > timeout_s)
      out.push_back(static_cast<int>(i));
  }
  return out;
}

std::vector<int> JobState::Silent(double now, double timeout_s) const {
  std::lock_guard<std::mutex> lock(mu_);
  return SilentRanks(ranks_, now, timeout_s);
}

std::vector<CompleteStep> JobState::CompleteSince(int64_t step) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CompleteStep> out;
  for (const CompleteStep& c : kept_) {
    if (c.step > step) out.push_back(c);
  }
  return out;
}

void JobState::RequestStop(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_.empty()) stop_ = why;
}

std::string JobState::stop_requested() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_;
}

std::vector<LiveBeat> JobState::Beats() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LiveBeat> out = beats_;
  out.resize(ranks_.size());
  return out;
}

std::vector<proto::StepReport> JobState::LatestReports() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

}  // namespace loom
