// The supervision rules (see supervisor.h), one function per rule.
#include "coordinator/supervisor/supervisor.h"

#include <algorithm>

#include "coordinator/service/launcher.h"
#include "coordinator/supervisor/outcome.h"

namespace loom {
namespace {

Action Fail(Status status, std::vector<int> ranks = {}) {
  Action a{ActionKind::kFail};
  a.status = std::move(status);
  a.ranks = std::move(ranks);
  return a;
}

// The ranks that failed or ended without reporting.
std::vector<int> Unwell(const std::vector<RankStatus>& ranks) {
  std::vector<int> out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!ranks[r].done || !ranks[r].ok) out.push_back(static_cast<int>(r));
  }
  return out;
}

std::string Seconds(double s) {
  return std::to_string(static_cast<int>(s)) + " s";
}

}  // namespace

bool Action::Ends() const {
  return kind == ActionKind::kInterrupt || kind == ActionKind::kFail ||
         kind == ActionKind::kFinish || kind == ActionKind::kStopped ||
         kind == ActionKind::kRestart;
}

Supervisor::Supervisor(SupervisorConfig config, double start)
    : config_(std::move(config)), start_(start), last_advance_(start) {}

std::vector<Action> Supervisor::Observe(const Observation& o) {
  std::vector<Action> out;
  if (ended_) return out;
  std::optional<Action> end = OnSignal(o.signal, &out);
  if (!end && stop_received_ && !stop_passed_on_ && !config_.launcher.empty() &&
      o.job.progress.step >= 1) {
    Action pass{ActionKind::kPassStopSignal};
    pass.signal = config_.stop_signal;
    out.push_back(pass);
    stop_passed_on_ = true;
  }
  if (!end) end = OnExit(o);
  if (!end) end = OnAnomaly(o, &out);
  if (!end) end = OnEnding(o);
  if (!end) end = OnStall(o);
  if (!end) end = OnSilence(o);
  if (!end) end = OnRegistration(o);
  if (end) {
    MaybeRestart(o, &*end);
    out.push_back(std::move(*end));
    ended_ = true;
  }
  return out;
}

std::optional<Action> Supervisor::OnAnomaly(const Observation& o, std::vector<Action>* out) {
  std::optional<Action> end;
  for (const detect::Verdict& v : o.anomalies) {
    Action a{ActionKind::kAnomaly};
    a.status = FailedPrecondition(std::string(detect::AnomalyKindName(v.kind)) + ": " + v.line);
    if (v.rank >= 0) a.ranks = {v.rank};
    a.step = v.step;
    out->push_back(a);
    if (end || config_.detect_action != "restart" || config_.restarts_left <= 0 ||
        config_.nodes_in_use <= 1 || v.node < 0 || o.job.progress.step < 1) {
      continue;
    }
    Action r{ActionKind::kRestart};
    r.status = a.status;
    r.ranks = a.ranks;
    r.step = o.job.progress.step;
    r.isolate_node = v.node;
    end = std::move(r);
  }
  return end;
}

void Supervisor::MaybeRestart(const Observation& o, Action* a) const {
  if (a->kind != ActionKind::kFail || config_.restarts_left <= 0 ||
      (o.job.progress.step < 1 && !config_.restoring)) {
    return;
  }
  const std::vector<RankStatus>& ranks = o.job.ranks;
  const bool abrupt = std::any_of(ranks.begin(), ranks.end(),
                                  [](const RankStatus& r) { return r.registered && !r.done; });
  const bool own_error = std::any_of(ranks.begin(), ranks.end(), [](const RankStatus& r) {
    return r.done && !r.ok && r.stopped_by == 0 && !r.peer_failure;
  });
  if (!abrupt || own_error) return;
  a->kind = ActionKind::kRestart;
  a->step = o.job.progress.step;
}

std::optional<Action> Supervisor::OnSignal(int signal, std::vector<Action>* out) {
  if (signal == 0) return std::nullopt;
  Action a{ActionKind::kInterrupt};
  a.signal = signal;
  if (signal == config_.stop_signal && !stop_received_) {
    stop_received_ = true;
    a.kind = ActionKind::kAnnounceStop;
    out->push_back(a);
    return std::nullopt;
  }
  return a;
}

std::optional<Action> Supervisor::OnExit(const Observation& o) const {
  const Progress& p = o.job.progress;
  const bool launched = !config_.launcher.empty();
  if (launched ? !o.launcher_exit.has_value() : p.done < config_.world) return std::nullopt;
  if ((!launched || *o.launcher_exit == 0) && p.done == config_.world && p.failed == 0) {
    return Action(ActionKind::kFinish);
  }
  Action stopped{ActionKind::kStopped};
  stopped.signal = StoppedBySignal(o.job.ranks, &stopped.step);
  if (stopped.signal != 0) return stopped;  // saved and stopped on a signal: not a failure
  const std::string why =
      launched ? config_.launcher + " (the workers' launcher) " + DescribeExit(*o.launcher_exit)
               : std::string("workers failed");
  return Fail(Internal(why + DescribeFailure(o.job.ranks)), Unwell(o.job.ranks));
}

std::optional<Action> Supervisor::OnEnding(const Observation& o) {
  const Progress& p = o.job.progress;
  if ((p.done == config_.world || p.failed > 0) && !ending_) ending_ = o.now;
  if (!ending_ || o.now - *ending_ <= kEndingGraceS) return std::nullopt;
  return Fail(DeadlineExceeded(std::string(p.failed > 0 ? "a rank failed" : "every rank finished") +
                               " " + Seconds(kEndingGraceS) +
                               " ago but the workers have not exited; stopping them" +
                               DescribeFailure(o.job.ranks)),
              Unwell(o.job.ranks));
}

std::optional<Action> Supervisor::OnStall(const Observation& o) {
  const Progress& p = o.job.progress;
  if (p.step != last_step_ || p.registered < config_.world) {
    last_step_ = p.step;
    last_advance_ = o.now;
  }
  slowest_step_s_ = std::max(slowest_step_s_, p.step_s);
  double stall_s = std::max(config_.silence_s,
                            kStallSteps * std::max(slowest_step_s_, config_.predicted_step_s));
  // While a rank's heartbeats say it is loading a checkpoint or finishing its final save, no
  // step completes for as long as the I/O takes: allow that too (the workers' own waits on it
  // fail after that and say so; a dead rank is still found by its silence). When the I/O
  // ends, the next step gets the usual time from then.
  const bool io = std::any_of(o.job.ranks.begin(), o.job.ranks.end(),
                              [](const RankStatus& r) { return r.checkpoint_io; });
  if (io_before_ && !io) last_advance_ = o.now;
  io_before_ = io;
  if (io) stall_s += config_.checkpoint_io_s;
  if (ending_ || p.registered < config_.world || o.now - last_advance_ <= stall_s) {
    return std::nullopt;
  }
  const std::string last =
      p.step > 0
          ? "last complete step " + std::to_string(p.step)
          : std::string(config_.loads_checkpoint ? "none yet: starting, or loading a checkpoint"
                                                 : "none yet");
  return Fail(DeadlineExceeded("no step completed for " + Seconds(stall_s) + " (" + last + ")" +
                               DescribeLaggards(o.job.ranks)),
              Laggards(o.job.ranks));
}

std::optional<Action> Supervisor::OnSilence(const Observation& o) const {
  const std::vector<int> silent = SilentRanks(o.job.ranks, o.now, config_.silence_s);
  if (silent.empty()) return std::nullopt;
  const RankStatus& s = o.job.ranks.at(static_cast<size_t>(silent[0]));
  return Fail(
      DeadlineExceeded("rank " + std::to_string(silent[0]) + " (" + s.host + ", pid " +
                       std::to_string(s.pid) + ") has not been heard from for " +
                       Seconds(config_.silence_s) + " (last step " + std::to_string(s.step) + ")"),
      {silent[0]});
}

std::optional<Action> Supervisor::OnRegistration(const Observation& o) const {
  const Progress& p = o.job.progress;
  if (p.registered >= config_.world || o.now - start_ <= config_.silence_s) return std::nullopt;
  std::vector<int> missing;
  for (size_t r = 0; r < o.job.ranks.size(); ++r) {
    if (!o.job.ranks[r].registered) missing.push_back(static_cast<int>(r));
  }
  return Fail(DeadlineExceeded(std::to_string(config_.world - p.registered) + " of " +
                               std::to_string(config_.world) + " workers did not register within " +
                               Seconds(config_.silence_s) + DescribeFailure(o.job.ranks)),
              missing);
}

}  // namespace loom
