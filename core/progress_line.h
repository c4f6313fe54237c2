// The progress line of a training run, shared by the trainer's console and `loom launch`: the
// line policy and the duration format. On a terminal of one process the line is rewritten in
// place ('\r') at every step and ends ('\n') every log_every steps; otherwise (a log file, or
// the pseudo-terminal mpirun gives each rank) only those lines are printed. A line also ends
// at the job's last step and when the caller says it is the final one. The caller formats the
// fields after "step S/N | "; lines printed between two steps call Break() first so that they
// do not land on an open in-place line.
//
//   ProgressLine line({.in_place = StdoutUpdatesInPlace(!LaunchedByMpi()),
//                      .log_every = 10, .steps = 1000, .first_step = resumed_at});
//   line.Show(step, /*final=*/false, "loss %.4f | ETA %s", loss, FormatDuration(eta).c_str());
//
// Not thread-safe: one thread prints.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace loom {

// "4m05s" under an hour, "2h03m" from one hour on (rounded to the second).
std::string FormatDuration(double seconds);

// Whether a progress line on stdout is rewritten in place: stdout is a terminal and this is the
// only process writing to it (under mpirun every rank's stdout is a pseudo-terminal even when
// mpirun's own is a log file, which would fill with '\r' lines).
bool StdoutUpdatesInPlace(bool one_process);

struct ProgressLineOptions {
  bool in_place = false;   // rewrite one line (StdoutUpdatesInPlace)
  int64_t log_every = 1;   // end a line each time a multiple of this is passed (< 1: 1)
  int64_t steps = 0;       // the job's last step (always a full line), printed after the '/'
  int64_t first_step = 0;  // the step before the first one shown (where a resumed run starts)
  FILE* out = stdout;      // not owned; must outlive the ProgressLine
};

class ProgressLine {
 public:
  explicit ProgressLine(const ProgressLineOptions& options);

  // Shows step `step` when it is due: a step after the last one shown, and either in place or a
  // full line (a multiple of log_every passed since the last one shown, the last step, or
  // `final`). Prints "[\r]step S/N | " + the printf-formatted fields + ["\n"] and flushes.
  // Returns whether it printed. Steps need not be consecutive (the launcher sees the complete
  // steps it polls).
  bool Show(int64_t step, bool final, const char* fields_format, ...)
      __attribute__((format(printf, 4, 5)));
  // Ends an in-place line left open, so that the next output starts on a line of its own.
  void Break();

  bool in_place() const { return in_place_; }
  // An in-place line is printed and not ended (the next output would land on it).
  bool open() const { return open_; }
  int64_t shown() const { return shown_; }  // the last step shown (first_step before any)

 private:
  bool in_place_;
  int64_t log_every_, steps_, shown_;
  FILE* out_;
  bool open_ = false;
};

}  // namespace loom
