// Slurm's environment of a job, read without Slurm. Every list is bounded before it is expanded:
// a malformed or hostile variable gives an error, never a billion host names.
#include "coordinator/slurm_env.h"

#include <algorithm>
#include <cstdio>

namespace loom {
namespace {

constexpr int64_t kMaxEntries = 1000000;

// A non-negative decimal of at most 9 digits (no sign, no spaces), or nullopt.
std::optional<int64_t> ParseCount(const std::string& s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  int64_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  return v;
}

// The numbers of one bracket, "01-03,07" -> 01 02 03 07 (padded to the width of each range's
// first number, as Slurm writes them).
Result<std::vector<std::string>> ExpandRanges(const std::string& ranges) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = ranges.find(',', start);
    const std::string r = ranges.substr(start, comma - start);
    const size_t dash = r.find('-');
    const std::string lo_text = r.substr(0, dash);
    const std::optional<int64_t> lo = ParseCount(lo_text);
    const std::optional<int64_t> hi =
        dash == std::string::npos ? lo : ParseCount(r.substr(dash + 1));
    if (!lo || !hi || *hi < *lo) {
      return InvalidArgument("'[" + ranges +
                             "]': expected numbers and ranges like 01-03,07, got '" + r + "'");
    }
    if (*hi - *lo + 1 + static_cast<int64_t>(out.size()) > kMaxEntries) {
      return InvalidArgument("'[" + ranges + "]': more than 1000000 names");
    }
    for (int64_t v = *lo; v <= *hi; ++v) {
      char num[32];
      std::snprintf(num, sizeof(num), "%0*lld", static_cast<int>(lo_text.size()),
                    static_cast<long long>(v));
      out.push_back(num);
    }
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// One name pattern without top-level commas: "r[1-2]n[01-02]" -> r1n01 r1n02 r2n01 r2n02.
Status ExpandName(const std::string& pattern, std::vector<std::string>* out) {
  std::vector<std::string> names = {""};
  size_t at = 0;
  while (at < pattern.size()) {
    const size_t open = pattern.find('[', at);
    const std::string literal = pattern.substr(at, open - at);
    if (literal.find(']') != std::string::npos) return InvalidArgument("']' without '['");
    for (std::string& n : names) n += literal;
    if (open == std::string::npos) break;
    const size_t close = pattern.find(']', open);
    if (close == std::string::npos) return InvalidArgument("'[' without ']'");
    LOOM_ASSIGN_OR_RETURN(std::vector<std::string> numbers,
                          ExpandRanges(pattern.substr(open + 1, close - open - 1)));
    if (static_cast<int64_t>(names.size() * numbers.size() + out->size()) > kMaxEntries) {
      return InvalidArgument("more than 1000000 names");
    }
    std::vector<std::string> product;
    for (const std::string& n : names) {
      for (const std::string& num : numbers) product.push_back(n + num);
    }
    names = std::move(product);
    at = close + 1;
  }
  out->insert(out->end(), names.begin(), names.end());
  return Status::Ok();
}

std::optional<std::string> Var(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

// "8", "a100:8", or several "type:count" items: the GPUs per node in all.
std::optional<int64_t> ParseGpus(const std::string& s) {
  int64_t total = 0;
  size_t start = 0;
  for (;;) {
    const size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma - start);
    const size_t colon = item.rfind(':');
    const std::optional<int64_t> n =
        ParseCount(colon == std::string::npos ? item : item.substr(colon + 1));
    if (!n) return std::nullopt;
    total += *n;
    if (comma == std::string::npos) return total;
    start = comma + 1;
  }
}

// A per-node count list for the allocation's hosts; `required`: an error when it is not set.
Status ReadPerNode(const EnvLookup& env, const char* name, size_t hosts, bool required,
                   std::vector<int>* out) {
  const std::optional<std::string> v = Var(env, name);
  if (!v) {
    return required ? FailedPrecondition(std::string(name) + " is not set") : Status::Ok();
  }
  Result<std::vector<int>> counts = ExpandCountList(*v);
  if (!counts.ok()) return counts.status().WithContext(std::string(name) + "='" + *v + "'");
  if (counts->size() != hosts) {
    return InvalidArgument(std::string(name) + "='" + *v + "': " + std::to_string(counts->size()) +
                           " counts for " + std::to_string(hosts) + " nodes");
  }
  *out = std::move(*counts);
  return Status::Ok();
}

Status ReadNumber(const EnvLookup& env, const char* name, int* out) {
  const std::optional<std::string> v = Var(env, name);
  if (!v || v->empty()) return Status::Ok();
  const std::optional<int64_t> n = ParseCount(*v);
  if (!n) return InvalidArgument(std::string(name) + "='" + *v + "': expected a count");
  *out = static_cast<int>(*n);
  return Status::Ok();
}

}  // namespace

int SlurmAllocation::TotalTasks() const {
  if (ntasks > 0) return ntasks;
  int sum = 0;
  for (int t : tasks) sum += t;
  return sum;
}

Result<std::vector<std::string>> ExpandHostList(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size() && list[i] == '[') ++depth;
    if (i < list.size() && list[i] == ']') --depth;
    if (i < list.size() && (list[i] != ',' || depth > 0)) continue;
    const std::string item = list.substr(start, i - start);  // a top-level item
    if (item.empty()) return InvalidArgument("host list '" + list + "': an empty name");
    const Status st = ExpandName(item, &out);
    if (!st.ok()) return st.WithContext("host list '" + list + "'");
    start = i + 1;
  }
  return out;
}

Result<std::vector<int>> ExpandCountList(const std::string& list) {
  std::vector<int> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma - start);
    const size_t paren = item.find("(x");
    const std::optional<int64_t> n = ParseCount(item.substr(0, paren));
    std::optional<int64_t> times = 1;
    if (paren != std::string::npos) {
      times = item.back() == ')' ? ParseCount(item.substr(paren + 2, item.size() - paren - 3))
                                 : std::nullopt;
    }
    if (!n || !times || *n < 1 || *n > kMaxEntries || *times < 1) {
      return InvalidArgument("expected counts like 2(x3),1, got '" + item + "'");
    }
    if (*times + static_cast<int64_t>(out.size()) > kMaxEntries) {
      return InvalidArgument("more than 1000000 counts");
    }
    out.insert(out.end(), static_cast<size_t>(*times), static_cast<int>(*n));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

Result<std::optional<SlurmAllocation>> ReadSlurmAllocation(const EnvLookup& env) {
  const std::optional<std::string> job = Var(env, "SLURM_JOB_ID");
  if (!job || job->empty()) return std::optional<SlurmAllocation>();
  SlurmAllocation a;
  a.job_id = *job;
  std::optional<std::string> nodes = Var(env, "SLURM_JOB_NODELIST");
  if (!nodes) nodes = Var(env, "SLURM_NODELIST");  // the name before Slurm 2.x, still set
  if (!nodes) {
    return FailedPrecondition("SLURM_JOB_ID=" + a.job_id +
                              " is set but SLURM_JOB_NODELIST is not: not a Slurm allocation");
  }
  Result<std::vector<std::string>> hosts = ExpandHostList(*nodes);
  if (!hosts.ok()) return hosts.status().WithContext("SLURM_JOB_NODELIST");
  a.hosts = std::move(*hosts);
  LOOM_RETURN_IF_ERROR(ReadPerNode(env, "SLURM_TASKS_PER_NODE", a.hosts.size(), true, &a.tasks));
  LOOM_RETURN_IF_ERROR(ReadPerNode(env, "SLURM_JOB_CPUS_PER_NODE", a.hosts.size(), false, &a.cpus));
  LOOM_RETURN_IF_ERROR(ReadNumber(env, "SLURM_NTASKS", &a.ntasks));
  LOOM_RETURN_IF_ERROR(ReadNumber(env, "SLURM_RESTART_COUNT", &a.restart_count));
  const std::optional<std::string> gpus = Var(env, "SLURM_GPUS_PER_NODE");
  if (gpus && !gpus->empty()) {
    const std::optional<int64_t> n = ParseGpus(*gpus);
    if (!n) {
      return InvalidArgument("SLURM_GPUS_PER_NODE='" + *gpus + "': expected N or type:N");
    }
    a.gpus_per_node = static_cast<int>(*n);
  } else {
    LOOM_RETURN_IF_ERROR(ReadNumber(env, "SLURM_GPUS_ON_NODE", &a.gpus_per_node));
  }
  return std::optional<SlurmAllocation>(std::move(a));
}

Result<Cluster> SlurmCluster(const SlurmAllocation& a, const Cluster& cpu_base) {
  const std::string job = DescribeSlurmJob(a);
  if (a.gpus_per_node > 0) {
    return FailedPrecondition(job + " has " + std::to_string(a.gpus_per_node) +
                              " GPUs per node: their type cannot be told from the allocation; "
                              "give a manifest with --cluster (docs/MANIFESTS.md)");
  }
  if (cpu_base.nodes.empty() || a.hosts.empty() || a.tasks.size() != a.hosts.size()) {
    return Internal("SlurmCluster: no base node, or no host with its tasks");
  }
  if (a.hosts.size() > 1 && cpu_base.inter.bandwidth <= 0) {
    return FailedPrecondition(cpu_base.file + ": no inter_node link for the nodes of " + job);
  }
  Cluster c;
  c.file = "<" + job + ">";
  c.name = job;
  DeviceType type = cpu_base.types[static_cast<size_t>(cpu_base.nodes[0].type)];
  // One type for every node: a synchronous job runs at the pace of its most crowded node.
  double share = 1;
  for (size_t i = 0; i < a.cpus.size() && i < a.tasks.size(); ++i) {
    share = std::min(share, static_cast<double>(a.cpus[i]) / a.tasks[i]);
  }
  type.peak_fp32 *= share;
  type.peak_bf16 *= share;
  type.memory_bandwidth *= share;
  type.memory *= share;
  c.types.push_back(type);
  for (size_t i = 0; i < a.hosts.size(); ++i) {
    Node n;
    n.name = a.hosts[i];
    n.host = a.hosts[i];
    n.devices = a.tasks[i];
    c.nodes.push_back(n);
  }
  c.intra = cpu_base.intra;
  c.inter = cpu_base.inter;
  return c;
}

std::string DescribeSlurmJob(const SlurmAllocation& a) {
  std::string s = "Slurm job " + a.job_id;
  if (a.restart_count > 0) s += ", restart " + std::to_string(a.restart_count);
  return s;
}

}  // namespace loom
