// The supervision of a launched job as pure policy. In: what the ranks said (a JobSnapshot: each
// rank's registration, step, heartbeats, checkpoint I/O, how it finished), how the workers'
// launcher ended, the signal this process received, and the time. Out: what to do, as actions
// (pass the stop signal on, stop the workers and fail naming what happened, finish...). No
// processes, sockets, clocks, files or output of its own: `loom launch` (cli/launch_command.cc)
// observes, executes the actions and prints; tests drive every branch with a made-up clock.
//
// The rules, checked at every observation in this order:
//   signal     the job's stop signal (checkpoint.signal), the first time: announce it; it is
//              passed on to the workers once every rank has completed a step (each has its
//              handler by then; before, the signal would kill it). Any other signal, or the
//              stop signal again: interrupt (stop the workers at once).
//   exit       the launcher exited: finished when it exited 0 and every rank reported
//              success; stopped when every rank stopped after the same step on a signal;
//              otherwise failed, naming the exit and what each rank said. Without a launcher
//              (workers started elsewhere) the same once every rank has reported its end.
//   ending     every rank finished, or one failed, and the workers have not exited within
//              kEndingGraceS: failed.
//   stall      every rank registered, but no step completed for max(silence, 20 x the slowest
//              step so far, 20 x the predicted step), plus the workers' checkpoint I/O
//              deadline while a rank says it is loading or saving (the next step gets the
//              usual time from the end of the I/O): failed, naming the ranks furthest behind.
//   silence    a registered, unfinished rank not heard from for `silence_s`: failed.
//   register   not every rank registered within `silence_s` of the start: failed.
//   anomaly    the detector named a hung rank, a slow rank, a slow link or node
//              (Observation::anomalies): announced once, in one line; with detect_action
//              "restart", restarts left and more than one node in use, a restart that isolates
//              the node named (kRestart with isolate_node).
// A failure becomes a restart (kRestart instead of kFail) when the job can be restarted from its
// in-memory snapshots: `restarts_left` > 0, this incarnation completed a step (or is itself a
// restart, which may fail while it restores), some rank ended without reporting (killed, lost
// with its node, silent, hung), and every error a rank did report came from a peer (a
// communication deadline): a failure a rank reported of its own (a bad setting, a diverged loss)
// would only repeat.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/service/job_state.h"
#include "core/status.h"
#include "fault/detector/detector.h"

namespace loom {

// The limits, in step times and seconds.
inline constexpr double kStallSteps = 20;    // no step for this many step times: a stall
inline constexpr double kEndingGraceS = 30;  // for the workers to exit once the job has ended

struct SupervisorConfig {
  int world = 0;  // ranks
  // "mpirun" or "srun": this process started the workers; "": they are started elsewhere.
  std::string launcher;
  int stop_signal = 0;  // the job's checkpoint.signal when it saves checkpoints (0: none)
  // A rank silent this long is lost; also the time the workers have to register, and the
  // shortest stall allowance.
  double silence_s = 60;
  double predicted_step_s = 0;  // the planner's step time (0: none)
  // Added to the stall allowance while a rank is in checkpoint I/O: the workers' own deadline
  // on it (LOOM_CKPT_TIMEOUT_MS).
  double checkpoint_io_s = 0;
  // The first step may wait for a checkpoint load (the job has a checkpoint dir, load or
  // init_from): a stall before it says so.
  bool loads_checkpoint = false;
  // Restarts still allowed from in-memory snapshots (0: a failure ends the launch).
  int restarts_left = 0;
  // This incarnation restores from snapshots: a failure before its first step (in the restore)
  // may be restarted too.
  bool restoring = false;
  // What a detector's verdict leads to: "restart" (isolate the node, replan, restore) or
  // "log"; "" when no detector runs.
  std::string detect_action;
  int nodes_in_use = 1;  // a node is isolated only when others are left
};

// What the supervisor is shown at one moment.
struct Observation {
  double now = 0;  // seconds, on the clock of the ranks' last_contact
  int signal = 0;  // a signal this process received since the last observation (0: none)
  std::optional<int> launcher_exit;        // the launcher's wait status, once it has exited
  JobSnapshot job;                         // taken after launcher_exit was read (every Done is in)
  std::vector<detect::Verdict> anomalies;  // the detector's new verdicts
};

enum class ActionKind {
  kAnnounceStop,    // the stop signal came: say that the workers save the step they are at
  kAnomaly,         // the detector named a culprit: `status` says it in one line, `ranks` it
  kPassStopSignal,  // send `signal` to the workers' launcher, which passes it on to every rank
  // Each of the following ends the supervision (Supervisor::ended()).
  kInterrupt,  // `signal` interrupts the launch: stop the workers at once (exit 128 + signal)
  kFail,       // the job failed as `status` says: stop the workers (if started here), report
  kFinish,     // every rank finished training
  kStopped,    // every rank saved step `step` and stopped on `signal` (or kStopTimeLimit)
  // The incarnation failed as `status` says, `ranks` the culprits, at last complete step
  // `step`: stop the workers and start the job again from its snapshots (the driver finds the
  // lost nodes, replaces them by spares or replans, and starts a new supervision).
  kRestart,
};

struct Action {
  explicit Action(ActionKind k) : kind(k) {}

  ActionKind kind;
  int signal = 0;          // kAnnounceStop, kPassStopSignal, kInterrupt, kStopped
  int64_t step = 0;        // kStopped: the step every rank saved; kRestart: the last complete
  Status status;           // kFail, kRestart: what happened, naming the ranks
  std::vector<int> ranks;  // kFail, kRestart: the ranks concerned (failed, silent, behind)
  int isolate_node = -1;   // kRestart after a detector's verdict: the node to leave out

  bool Ends() const;  // the supervision is over
};

// Not thread-safe: one thread observes. Times only move forward.
class Supervisor {
 public:
  // `start`: now, once the workers are started (the registration limit counts from it).
  Supervisor(SupervisorConfig config, double start);

  // The actions for this observation, in the order to carry them out; at most one ends the
  // supervision, and it is the last. After it, no more actions.
  std::vector<Action> Observe(const Observation& o);

  bool ended() const { return ended_; }
  double start() const { return start_; }

 private:
  std::optional<Action> OnSignal(int signal, std::vector<Action>* out);
  std::optional<Action> OnExit(const Observation& o) const;
  std::optional<Action> OnEnding(const Observation& o);
  std::optional<Action> OnStall(const Observation& o);
  std::optional<Action> OnSilence(const Observation& o) const;
  std::optional<Action> OnRegistration(const Observation& o) const;
  std::optional<Action> OnAnomaly(const Observation& o, std::vector<Action>* out);
  // A failure `a` the job can be restarted from: kRestart instead (see the rules above).
  void MaybeRestart(const Observation& o, Action* a) const;

  const SupervisorConfig config_;
  const double start_;
  bool ended_ = false;
  bool stop_received_ = false, stop_passed_on_ = false;
  std::optional<double> ending_;  // when every rank had finished, or one failed
  // Stall detection: the last complete step, when the job last advanced (a new step, a rank
  // registering, the end of checkpoint I/O), the slowest step seen, whether a rank was in
  // checkpoint I/O at the previous observation.
  int64_t last_step_ = -1;
  double last_advance_;
  double slowest_step_s_ = 0;
  bool io_before_ = false;
};

}  // namespace loom
