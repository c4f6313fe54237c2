// The one signal mechanism of every Loom process. A handler only records the signal (how many
// times it came, and in which order the signals first came) and wakes a waiter: nothing else, so
// it is async-signal-safe whichever thread it lands on. The code that decides reads the record
// from any thread (a flag looked at between steps or tensors) or waits on it with a deadline,
// and then does what a handler must not (print, list a directory, stop the workers).
//
// Each caller installs its signals as one set with two choices:
//   OnRepeat   kDefaultAction: once one signal of the set came, every signal of the set has its
//              default action again (a stuck process can still be stopped by the next one);
//              kRecordAgain: every arrival is recorded (a launcher must never die of a signal
//              and orphan its workers).
//   IfIgnored  kStayIgnored: a signal ignored when the process started (nohup; a script's
//              background job ignores SIGINT) stays ignored; kTakeOver: it is handled anyway
//              (a signal the job names, or one the launcher must act on).
// Users: core/interrupt.h (Ctrl-C, SIGTERM, SIGHUP for the tools that write files and for
// `loom train`), core/stop_signal.h (checkpoint.signal: save, then stop), cli/launch_command.cc
// (every stop or preemption signal; the supervision loop waits on them).
#pragma once

#include <chrono>
#include <span>
#include <vector>

namespace loom {

enum class OnRepeat { kDefaultAction, kRecordAgain };
enum class IfIgnored { kStayIgnored, kTakeOver };

// Installs the recording handler on each of `signals` (1-64) as one set, SA_RESTART, and returns
// those now handled: all of them, less any left ignored under kStayIgnored or that cannot be
// caught (SIGKILL, SIGSTOP). A signal belongs to the set it was installed with last. Called from
// one thread (normally the main thread), before the record is read.
std::vector<int> RecordSignals(const std::vector<int>& signals, OnRepeat on_repeat,
                               IfIgnored if_ignored);

// How many times `sig` has been recorded since the process started (0 for a signal never
// handled here). Async-signal-safe; any thread.
int SignalCount(int sig);
// Of `signals`, the one recorded first (0: none yet). Async-signal-safe; any thread.
int FirstSignal(std::span<const int> signals);

// Waits for the signals of one set: each one recorded is returned once (several arrivals of one
// signal between two calls are returned once), counting from the start of the process, so that
// none recorded between RecordSignals and the construction is missed. One thread uses a waiter;
// several waiters (in several threads) may watch the same signals: a signal wakes one of them
// at once, the others within 50 ms.
class SignalWaiter {
 public:
  explicit SignalWaiter(std::vector<int> signals);

  // The next of the signals recorded since the last call, or 0 once `deadline` has passed
  // without one. Never blocks past the deadline.
  int Wait(std::chrono::steady_clock::time_point deadline);
  // Without waiting.
  int Poll() { return Wait(std::chrono::steady_clock::time_point::min()); }

 private:
  int Take();

  std::vector<int> signals_;
  std::vector<int> seen_;  // per signals_: the count already returned
};

}  // namespace loom
