// Stopping a run cleanly on a signal: preemption and time limits. Slurm sends one before it
// kills a job (`#SBATCH --signal=USR1@120`, or SIGTERM then SIGKILL after KillWait), and mpirun
// forwards SIGUSR1/SIGUSR2 to every rank. The handler only records the signal; the trainer
// agrees with the other ranks at a step boundary (Checkpointer::StopVote), saves a checkpoint,
// waits for its commit and exits with 128 + the signal, so the job resumes where it stopped.
#pragma once

#include <string>

#include "core/status.h"

namespace loom {

// "SIGUSR1", "USR1", "SIGUSR2", "SIGTERM", "SIGINT" (with or without the SIG prefix, any case)
// -> the signal number; "none" -> 0. Anything else is an error naming `where`.
Result<int> ParseStopSignal(const std::string& name, const std::string& where);
std::string StopSignalName(int sig);  // "SIGUSR1"; "none" for 0

// Records the first `sig` (when not 0) for PendingStopSignal instead of its default action; a
// second one has its default action again (a run stuck while saving can still be stopped).
void InstallStopSignal(int sig);
// The signal received since InstallStopSignal (0: none). Async-signal-safe to set, read anywhere.
int PendingStopSignal();

}  // namespace loom
