// Stopping a run cleanly on a signal: preemption and time limits. Slurm sends one before it
// kills a job (`#SBATCH --signal=USR1@120`, or SIGTERM then SIGKILL after KillWait), and mpirun
// forwards SIGUSR1/SIGUSR2 to every rank. The handler (core/signals.h) only records the signal;
// the trainer agrees with the other ranks at a step boundary (Checkpointer::StopVote), saves a
// checkpoint, waits for its commit and exits with 128 + the signal, so the job resumes where it
// stopped. The names and exit codes are here, below the job parser and the launcher, which use
// them too.
#pragma once

#include <string>

#include "core/status.h"

namespace loom {

// Why a run stopped early after saving: a signal number (1-64), or kStopTimeLimit when
// checkpoint.exit_after_minutes ran out (no signal). Ranks vote the maximum, so all agree.
inline constexpr int kStopTimeLimit = 65;
// The process's exit code for a run stopped after saving: 128 + the signal, as a process killed
// by it would report; 75 (EX_TEMPFAIL: not finished, try again) for the time limit.
int StopExitCode(int reason);

// "SIGUSR1", "USR1", "SIGUSR2", "SIGTERM", "SIGINT" (with or without the SIG prefix, any case)
// -> the signal number; "none" -> 0. Anything else is an error naming `where`.
Result<int> ParseStopSignal(const std::string& name, const std::string& where);
// "SIGUSR1"; "the time limit" for kStopTimeLimit; "none" for 0.
std::string StopSignalName(int sig);

// Records the first `sig` (when not 0) for PendingStopSignal instead of its default action, even
// when it was ignored at the start (the job names it); a second one has its default action
// again (a run stuck while saving can still be stopped). Once one has come, calling this again
// does not re-arm it.
void InstallStopSignal(int sig);
// The signal received since InstallStopSignal (0: none). Async-signal-safe; any thread.
int PendingStopSignal();

}  // namespace loom
