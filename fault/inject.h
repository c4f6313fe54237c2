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
//   LOOM_FAULT_KILL=RANK:STEP[:AT]   world rank RANK kills itself (SIGKILL): AT = step (before
//                                    step STEP, the default), copy, encode or transfer (while its
//                                    in-memory snapshot of step STEP is copied, encoded or sent)
//   LOOM_FAULT_NODE_DROP=NODE[,NODE...]:STEP  every rank of each node NODE (its name in the plan)
//                                    removes the node's snapshot memory and kills itself before
//                                    step STEP: the nodes are lost
//   LOOM_FAULT_SNAPSHOT_DELAY=RANK:MS  world rank RANK waits MS ms before each transfer of its
//                                    snapshots' fragments (a slow link)
//   LOOM_FAULT_SNAPSHOT_CORRUPT=RANK[:parity]  when a restarted job takes stock of its snapshots,
//                                    a byte of old rank RANK's images (or of the parity it keeps),
//                                    in every sealed slot, is flipped first: fragments that fail
//                                    their digests
//   LOOM_FAULT_SLOW=RANK:FACTOR[:STEP]  world rank RANK is slow: from step STEP (default 1), the
//                                    work between its calls takes FACTOR (>= 1, e.g. 1.5)
//                                    times as long (before each call it issues it burns the
//                                    extra CPU time, as a slower processor would take it)
//   LOOM_FAULT_LINK_DELAY=SRC:DST:FACTOR[:STEP]  the link from world rank SRC to DST is slow:
//                                    from step STEP, each send's data leaves after (FACTOR - 1)
//                                    times the link's typical send of those bytes before the
//                                    fault (the median, per byte)
//   LOOM_FAULT_STOP=RANK:STEP[:before|inside]  world rank RANK stops (SIGSTOP, as a machine that
//                                    freezes) before step STEP, or inside its first collective
//                                    of step STEP
//   LOOM_FAULT_EPOCH=N               the hang, the kills, the node drop, the delays, the slow
//                                    rank and link and the stop act in the
//                                    job's incarnation N only (default 0: the first; `loom launch`
//                                    numbers restarts), the corruption in the restore that starts
//                                    incarnation N + 1
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

// What a worker is, for the faults that depend on it: its incarnation (epoch), the job's key and
// its node's name (a node drop removes that node's snapshot memory). Default: epoch 0, no node.
// Call before training starts.
void SetFaultIdentity(int epoch, const std::string& job_key, const std::string& node);

// Reads every LOOM_FAULT_* variable of the environment; an unknown one or a malformed value is an
// InvalidArgument naming the variable, its syntax and the value. When any is set, installs the
// handler that acts on them (core/fault_point.h). Call once, before starting threads.
Status InstallFaultInjection();

}  // namespace loom
