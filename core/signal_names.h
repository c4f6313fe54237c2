// Names and exit codes of the signals a run stops on after saving (checkpoint.signal: preemption,
// the time limit). Pure functions, so that the job file's parser can check the names.
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

}  // namespace loom
