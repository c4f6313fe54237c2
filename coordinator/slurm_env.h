// A Slurm allocation as the SLURM_* variables of its job describe it (salloc and sbatch set
// them for the shell and everything it starts), and the cluster `loom launch` plans on inside one
// when no manifest is given. Pure code: the variables come in through a lookup function, so tests
// need no Slurm. Slurm writes node and count lists compressed:
//   SLURM_JOB_NODELIST=node[01-03,07],gpu5   -> node01 node02 node03 node07 gpu5
//   SLURM_TASKS_PER_NODE=2(x3),1             -> 2 2 2 1   (the same for SLURM_JOB_CPUS_PER_NODE)
// A 4-task job on one node: SLURM_JOB_NODELIST=localhost, SLURM_TASKS_PER_NODE=4 gives a cluster
// of one node "localhost" with 4 devices, one per task that `srun -n 4` starts.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/cluster.h"
#include "core/status.h"

namespace loom {

struct SlurmAllocation {
  std::string job_id;              // SLURM_JOB_ID
  std::vector<std::string> hosts;  // SLURM_JOB_NODELIST, expanded, in Slurm's order
  std::vector<int> tasks;          // per host: SLURM_TASKS_PER_NODE
  std::vector<int> cpus;           // per host: SLURM_JOB_CPUS_PER_NODE (empty: not set)
  int ntasks = 0;                  // SLURM_NTASKS (0: not set; tasks per node say it then)
  int gpus_per_node = 0;           // SLURM_GPUS_PER_NODE, else SLURM_GPUS_ON_NODE (0: none)
  int restart_count = 0;           // SLURM_RESTART_COUNT: times the job was requeued so far

  int TotalTasks() const;  // ntasks when set, else the sum of tasks
};

// Returns the value of an environment variable, or nullptr when it is not set (std::getenv).
using EnvLookup = std::function<const char*(const char*)>;

// The allocation this process runs in; nullopt outside one (SLURM_JOB_ID not set). An error names
// the variable and its value (a missing SLURM_JOB_NODELIST, a malformed list, a count per node
// for another number of nodes).
Result<std::optional<SlurmAllocation>> ReadSlurmAllocation(const EnvLookup& env);

// "node[01-03,07],gpu5" -> node01 node02 node03 node07 gpu5. Zero padding follows the range's
// first number; several bracket groups in one name multiply ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1
// r2n2). At most 1,000,000 names.
Result<std::vector<std::string>> ExpandHostList(const std::string& list);

// "2(x3),1" -> 2 2 2 1 (counts of at least 1, at most 1,000,000 entries).
Result<std::vector<int>> ExpandCountList(const std::string& list);

// The cluster of allocation `a`: one node per host (its name and host the Slurm node name), with
// as many devices as tasks run there, of the device type of `cpu_base`'s first node (the built-in
// CPU manifest) and its links. When a node has fewer CPUs than tasks, the tasks share them: each
// device's compute, memory bandwidth and memory are scaled by cpus / tasks of the most crowded
// node, as the built-in manifest's are for more ranks than cores. FailedPrecondition when the
// allocation has GPUs: their type cannot be told from the allocation (a manifest must say).
Result<Cluster> SlurmCluster(const SlurmAllocation& a, const Cluster& cpu_base);

// "Slurm job 42" or "Slurm job 42, restart 1": for the lines that say where a job runs.
std::string DescribeSlurmJob(const SlurmAllocation& a);

}  // namespace loom
