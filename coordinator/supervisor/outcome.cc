// Failure descriptions and the common stop (see outcome.h).
#include "coordinator/supervisor/outcome.h"

#include <algorithm>
#include <climits>

namespace loom {
namespace {

// "host, pid 7"
std::string Where(const RankStatus& r) {
  return r.host + ", pid " + std::to_string(r.pid);
}

}  // namespace

std::string DescribeFailure(const std::vector<RankStatus>& ranks) {
  std::string out;
  std::vector<int> silent;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankStatus& s = ranks[r];
    if (s.done && !s.ok) {
      // Step 0: no step reported (failed while starting or loading a checkpoint).
      out += "\n  rank " + std::to_string(r) + " (" + Where(s) + ") failed " +
             (s.step > 0 ? "after step " + std::to_string(s.step)
                         : std::string("before its first step")) +
             ": " + s.error;
    } else if (!s.done) {
      silent.push_back(static_cast<int>(r));
    }
  }
  if (!silent.empty()) {
    // Named, since a hung rank is often among them (the others report its deadline).
    constexpr size_t kNamed = 8;
    std::string list;
    for (size_t i = 0; i < std::min(silent.size(), kNamed); ++i) {
      list += (i ? ", " : "") + std::to_string(silent[i]);
    }
    if (silent.size() > kNamed) list += " and " + std::to_string(silent.size() - kNamed) + " more";
    out += "\n  " + std::string(silent.size() == 1 ? "rank " : "ranks ") + list +
           " ended without reporting (hung or killed, or stopped by the others' failure)";
  }
  return out;
}

std::vector<int> Laggards(const std::vector<RankStatus>& ranks) {
  int64_t low = INT64_MAX;
  for (const RankStatus& r : ranks) low = std::min(low, r.step);
  std::vector<int> out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].step == low) out.push_back(static_cast<int>(i));
  }
  return out;
}

std::string DescribeLaggards(const std::vector<RankStatus>& ranks) {
  const std::vector<int> behind = Laggards(ranks);
  if (behind.empty()) return "";
  std::string who;
  for (const int i : behind) {
    who += (who.empty() ? "" : ", ") + std::to_string(i) + " (" +
           Where(ranks[static_cast<size_t>(i)]) + ")";
  }
  return "; furthest behind at step " + std::to_string(ranks[static_cast<size_t>(behind[0])].step) +
         ": rank " + who;
}

int StoppedBySignal(const std::vector<RankStatus>& ranks, int64_t* step) {
  if (ranks.empty() || ranks[0].stopped_by == 0) return 0;
  for (const RankStatus& r : ranks) {
    if (!r.done || r.stopped_by != ranks[0].stopped_by || r.step != ranks[0].step) return 0;
  }
  *step = ranks[0].step;
  return ranks[0].stopped_by;
}

}  // namespace loom
