// Fault injection for the tests, in one validated table: every LOOM_FAULT_* variable Loom reads,
// its syntax and what it does at which fault point (core/fault_point.h). The binary calls
// InstallFaultInjection once at start-up: a LOOM_FAULT_* variable that is not in the table, or
// whose value does not parse, is refused by name (a typo must not make a fault test pass
// vacuously); the points then act as the variables say.
//
//   LOOM_FAULT_HANG=RANK:STEP[:MS]   world rank RANK stops participating before step STEP, for
//                                    good or for MS milliseconds (a rank that comes back late)
//   LOOM_FAULT_CKPT_KILL=RANK:N      world rank RANK kills itself (SIGKILL) at the N-th checkpoint
//                                    crash point it reaches
//   LOOM_FAULT_CKPT_TRACE=1          every rank prints each checkpoint crash point it reaches
//                                    ("loom: checkpoint crash point N on rank R (where)")
//   LOOM_FAULT_CKPT_SLOW_MS=MS       a slow file system: every rank waits MS milliseconds before
//                                    looking for a checkpoint to resume
//   LOOM_FAULT_INTERRUPT_AT=N        the N-th interrupt check of a tool that writes files raises
//                                    SIGINT, as a Ctrl-C at that moment would
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace loom {

struct FaultVariable {
  const char* name;     // "LOOM_FAULT_HANG"
  const char* syntax;   // "RANK:STEP[:MS]"
  const char* meaning;  // one line
};

// The table's rows, in the order above.
const std::vector<FaultVariable>& FaultVariables();

// Reads every LOOM_FAULT_* variable of the environment; an unknown one or a malformed value is an
// InvalidArgument naming the variable, its syntax and the value. When any is set, installs the
// handler that acts on them (core/fault_point.h). Call once, before starting threads.
Status InstallFaultInjection();

}  // namespace loom
