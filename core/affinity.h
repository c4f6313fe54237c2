// Splitting one host's cores between the CPU ranks placed on it (several ranks of a node, or
// logical nodes: several manifest nodes with one `host`, which stand for separate machines in tests
// and trials on one computer), as mpirun's --bind-to core does. Left to the scheduler, ranks'
// compute wanders between cores, and a core that the hypervisor or a neighbour slows makes
// whichever ranks sit on it look slow: measured, two tensor-parallel partners doing the same work
// differed by 1.4x for a dozen steps (docs/FAULTS.md). Pinned, ranks that share a core share what
// slows it, and the anomaly detector compares them with each other.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "core/tunables.h"

namespace loom {

extern const IntTunable kPinCoresTunable;  // LOOM_PIN_CORES: 0 leaves compute on any core

// Share `share` (0-based) of `shares` of the CPUs `cpus` (ids, in order): with at least as many
// CPUs as shares a contiguous block of about cpus/shares; with fewer, one CPU, consecutive shares
// on the same one (share * cpus / shares): the ranks of a logical node, numbered consecutively,
// share a CPU. Empty for shares < 2, a share out of range or no CPUs.
std::vector<int> CoreShare(const std::vector<int>& cpus, int share, int shares);

// The CPUs the calling thread may run on (sched_getaffinity).
Result<std::vector<int>> AllowedCpus();

// Pins the calling thread, and the threads it starts from now on (they inherit it), to its share
// of the host's CPUs; threads already running (communication progress, the coordinator client)
// keep running on any core, as they would on a machine with idle cores: a receive is noticed when
// its progress thread gets a core, and pinned behind three busy ranks it waits for their time
// slices. Left alone (returns an empty list) when shares < 2, with LOOM_PIN_CORES=0, or when the
// thread may not run on every online CPU: someone (mpirun --bind-to, Slurm's --cpu-bind or task
// plugin, taskset) has placed it already. srun's tasks that Slurm did not bind are pinned as
// mpirun's are (unpinned, the Slurm trial's healthy ranks drew 2-6 false slow-rank lines a run).
// Returns the CPUs it now runs on.
Result<std::vector<int>> PinToCoreShare(int share, int shares);

// "0-3,6" for people.
std::string CpuListString(const std::vector<int>& cpus);

}  // namespace loom
