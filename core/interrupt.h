// Interrupting a tool that writes files (Ctrl-C, SIGTERM, SIGHUP) without leaving them behind,
// on core/signals' record. The handler only records the signal; the tool checks between units
// of work (a tensor), returns the error below, removes its temporary output on that error path
// as on any other, and exits with 128 + the signal. A second signal has its default action (a
// stuck tool can still be killed). One that arrives after the last check (during the final
// commit) is not acted on: the output is complete by then. `loom train` uses the same handlers
// and waits for them (cli/train_interrupt.h).
#pragma once

#include <vector>

#include "core/status.h"

namespace loom {

// Records SIGINT, SIGTERM and SIGHUP instead of their default action, except one ignored when
// the process started (nohup) and `except` (a signal another handler owns; 0: none). After the
// first, those installed have their default action again. Returns those installed (for a
// SignalWaiter, core/signals.h).
std::vector<int> InstallInterruptHandlers(int except = 0);
// The first signal recorded since InstallInterruptHandlers (0: none). Async-signal-safe.
int InterruptSignal();
// Ok, or an error "interrupted by SIGINT" once a signal was recorded, with `what`: what was
// being written (its partial output removed), or, when !writing, read. Called from one thread.
// (LOOM_FAULT_INTERRUPT_AT=N raises SIGINT at the N-th call, for the tests.)
Status CheckInterrupted(const char* what, bool writing = true);

}  // namespace loom
