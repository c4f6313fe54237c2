// Stopping a run cleanly on a signal: preemption and time limits. Slurm sends one before it
// kills a job (`#SBATCH --signal=USR1@120`, or SIGTERM then SIGKILL after KillWait), and mpirun
// forwards SIGUSR1/SIGUSR2 to every rank. The handler only records the signal; the trainer
// agrees with the other ranks at a step boundary (Checkpointer::StopVote), saves a checkpoint,
// waits for its commit and exits with 128 + the signal, so the job resumes where it stopped.
#pragma once

#include "core/signal_names.h"

namespace loom {

// Records the first `sig` (when not 0) for PendingStopSignal instead of its default action; a
// second one has its default action again (a run stuck while saving can still be stopped).
void InstallStopSignal(int sig);
// The signal received since InstallStopSignal (0: none). Async-signal-safe to set, read anywhere.
int PendingStopSignal();

}  // namespace loom
