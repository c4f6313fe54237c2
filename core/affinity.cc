// Pinning a logical node's compute to its share of the host's cores (affinity.h).
#include "core/affinity.h"

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace loom {

const IntTunable kPinCoresTunable = RegisterTunable({"LOOM_PIN_CORES", 1, 0, 1, "0 or 1"});

std::vector<int> CoreShare(const std::vector<int>& cpus, int share, int shares) {
  const int n = static_cast<int>(cpus.size());
  if (shares < 2 || share < 0 || share >= shares || n == 0) return {};
  // Fewer CPUs than shares: consecutive shares (a logical node's ranks) on one CPU.
  if (n < shares) return {cpus[static_cast<size_t>(static_cast<long long>(share) * n / shares)]};
  // Blocks as even as they come: share i gets [i * n / shares, (i + 1) * n / shares).
  const int begin = static_cast<int>(static_cast<long long>(share) * n / shares);
  const int end = static_cast<int>(static_cast<long long>(share + 1) * n / shares);
  return std::vector<int>(cpus.begin() + begin, cpus.begin() + end);
}

Result<std::vector<int>> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) {
    return Internal(std::string("sched_getaffinity: ") + std::strerror(errno));
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

Result<std::vector<int>> PinToCoreShare(int share, int shares) {
  if (shares < 2 || TunableOr(kPinCoresTunable) == 0) return std::vector<int>{};
  LOOM_ASSIGN_OR_RETURN(std::vector<int> allowed, AllowedCpus());
  if (static_cast<long>(allowed.size()) < ::sysconf(_SC_NPROCESSORS_ONLN)) {
    return std::vector<int>{};  // placed by someone else: theirs to decide
  }
  const std::vector<int> mine = CoreShare(allowed, share, shares);
  if (mine.empty()) return std::vector<int>{};
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : mine) CPU_SET(c, &set);
  if (::sched_setaffinity(0, sizeof(set), &set) != 0) {
    return Internal("sched_setaffinity(CPUs " + CpuListString(mine) + "): " + std::strerror(errno));
  }
  return mine;
}

std::string CpuListString(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(cpus[i]);
    if (j > i) s += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return s;
}

}  // namespace loom
