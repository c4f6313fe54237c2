// Layout enumeration, memory pruning and branch-and-bound ranking.
#include "coordinator/planner/search.h"
#include "model/config.h"

#include <algorithm>
#include <chrono>

namespace loom {
namespace {

// Micro-batches larger than this are not tried unless the job fixes one: activations grow
// linearly with it while GEMM efficiency has long saturated.
constexpr int64_t kMaxMicroBatch = 32;

std::vector<int> Divisors(int64_t n, int64_t limit) {
  std::vector<int> out;
  for (int64_t d = 1; d <= n && d <= limit; ++d) {
    if (n % d == 0) out.push_back(static_cast<int>(d));
  }
  return out;
}

template <typename T>
std::vector<int> Choices(const std::optional<int64_t>& fixed, const std::vector<T>& all) {
  if (fixed) return {static_cast<int>(*fixed)};
  return std::vector<int>(all.begin(), all.end());
}

// The world size: fixed by the job, or every device of the pool (at most plan.devices).
Result<int> WorldSize(const PlanJob& job, int64_t pool_devices) {
  if (job.FullyFixed()) return static_cast<int>(*job.tp * *job.cp * *job.pp * *job.dp);
  int64_t w = pool_devices;
  if (job.devices > 0) w = std::min(w, job.devices);
  return static_cast<int>(w);
}

struct Enumerated {
  Candidate c;
  double lower_bound = 0;
};

}  // namespace

Result<SearchResult> SearchPlans(const PlanJob& job, const Cluster& cluster,
                                 const Calibration& calibration, int top_k) {
  const auto start = std::chrono::steady_clock::now();
  SearchResult res;
  const std::vector<int> pool = NodePool(cluster, &res.note);
  const int64_t pool_devices =
      static_cast<int64_t>(pool.size()) * cluster.nodes[static_cast<size_t>(pool[0])].devices;
  LOOM_ASSIGN_OR_RETURN(int world, WorldSize(job, pool_devices));
  LOOM_ASSIGN_OR_RETURN(res.placement, PlaceRanks(cluster, pool, world));
  const RankPlacement& place = res.placement;
  if (cluster.types[static_cast<size_t>(place.type)].Peak(job.precision) <= 0) {
    return InvalidArgument("device type '" + cluster.types[static_cast<size_t>(place.type)].name +
                           "' has no peak_flops." + PrecisionName(job.precision) +
                           " (the job asks for " + PrecisionName(job.precision) + ")");
  }
  res.hardware =
      MakeHardware(cluster, place.type, calibration, job.precision, place.devices_per_rank);
  PathCache paths(cluster, place, res.hardware);
  PipelineModel pipeline;
  TimeModel model(job, res.hardware, place, &paths, &pipeline);
  const ModelConfig& m = job.model;

  LayoutConstraints constraints;
  constraints.heads = m.heads;
  constraints.layers = m.layers;
  constraints.vocab = m.vocab;
  constraints.seq = job.seq;
  constraints.hidden = m.hidden;
  constraints.global_batch = job.global_batch;
  std::vector<Enumerated> fits;
  std::vector<int> tps;
  for (int t : Divisors(place.ranks_per_node, place.ranks_per_node)) {
    if (m.heads % t == 0 && m.ffn() % t == 0) tps.push_back(t);
  }
  std::vector<Recompute> modes{Recompute::kNone, Recompute::kFull};
  if (job.selective_recompute) modes.push_back(Recompute::kSelective);
  if (job.recompute) modes = {*job.recompute};

  for (int tp : Choices(job.tp, tps)) {
    for (int cp : Choices(job.cp, Divisors(world / tp, std::max<int64_t>(1, job.seq / 2)))) {
      if (cp > 1 && job.seq % (2 * cp) != 0) continue;
      for (int pp : Choices(job.pp, Divisors(m.layers, world))) {
        const int64_t mp = static_cast<int64_t>(tp) * cp * pp;
        if (world % mp != 0) continue;
        const int dp = static_cast<int>(world / mp);
        if ((job.dp && *job.dp != dp) || job.global_batch % dp != 0) continue;
        const int64_t per_rank = job.global_batch / dp;
        for (int mb : Choices(job.micro_batch, Divisors(per_rank, kMaxMicroBatch))) {
          if (per_rank % mb != 0) continue;
          const int64_t micro = per_rank / mb;
          // (schedule, vpp) pairs.
          std::vector<std::pair<ScheduleKind, int>> scheds;
          for (int vpp : Choices(job.vpp, Divisors(m.layers / pp, m.layers / pp))) {
            if (m.layers % (static_cast<int64_t>(pp) * vpp) != 0) continue;
            ScheduleKind kind = vpp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1F1B;
            if (job.schedule) kind = *job.schedule;
            if (vpp > 1 && (pp < 2 || kind != ScheduleKind::kInterleaved || micro % pp != 0)) {
              continue;
            }
            if (vpp == 1 && kind == ScheduleKind::kInterleaved) continue;
            scheds.push_back({kind, vpp});
          }
          for (auto [kind, vpp] : scheds) {
            for (int zero : Choices(job.zero, std::vector<int>{0, 1, 2, 3})) {
              if (!job.zero && zero > 0 && dp * cp == 1) continue;  // nothing to shard
              std::vector<int> sps{0};
              if (tp > 1 && (job.seq / cp) % tp == 0) sps.push_back(1);
              if (job.sp) sps = {*job.sp ? 1 : 0};
              for (int sp : sps) {
                for (Recompute rc : modes) {
                  Candidate c;
                  c.layout = Layout{tp, cp, pp, vpp, dp, zero, sp == 1};
                  c.micro_batch = mb;
                  c.recompute = rc;
                  c.schedule = kind;
                  // The runtime's own checks (parallel/layout.h): fixed fields skip the filters
                  // above, and nothing the workers would refuse may be proposed.
                  if (!c.layout.Validate(world, constraints).ok()) continue;
                  ++res.stats.enumerated;
                  LOOM_ASSIGN_OR_RETURN(Prediction mem, model.Memory(c));
                  if (!mem.fits()) {
                    ++res.stats.rejected_memory;
                    if (!res.closest_rejected ||
                        mem.peak_memory < res.closest_rejected->peak_memory) {
                      res.closest_rejected = mem;
                    }
                    continue;
                  }
                  fits.push_back({c, model.LowerBound(c)});
                }
              }
            }
          }
        }
      }
    }
  }
  std::sort(fits.begin(), fits.end(),
            [](const Enumerated& a, const Enumerated& b) { return a.lower_bound < b.lower_bound; });
  for (const Enumerated& e : fits) {
    if (static_cast<int>(res.plans.size()) >= top_k &&
        e.lower_bound >= res.plans.back().time.step) {
      break;  // nothing left can enter the top k
    }
    LOOM_ASSIGN_OR_RETURN(Prediction p, model.Predict(e.c));
    ++res.stats.evaluated;
    auto at = std::upper_bound(
        res.plans.begin(), res.plans.end(), p,
        [](const Prediction& a, const Prediction& b) { return a.time.step < b.time.step; });
    res.plans.insert(at, p);
    if (static_cast<int>(res.plans.size()) > top_k) res.plans.pop_back();
  }
  res.stats.simulations = pipeline.simulations();
  res.stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (res.plans.empty()) {
    if (res.stats.enumerated == 0) {
      return InvalidArgument("no layout satisfies the job's constraints on " +
                             std::to_string(world) + " devices (check that the fixed parallel " +
                             "fields, model.heads, model.layers, data.seq and " +
                             "data.global_batch divide as required)");
    }
    const Prediction& r = *res.closest_rejected;
    return InvalidArgument(
        "no layout fits in memory: the closest, " + r.candidate.ToString() + ", needs " +
        std::to_string(r.peak_memory / 1e9) + " GB on pipeline stage " +
        std::to_string(r.peak_stage) + " but a device offers " + std::to_string(r.capacity / 1e9) +
        " GB after " + std::to_string(static_cast<int>(job.headroom * 100)) + "% headroom");
  }
  return res;
}

}  // namespace loom
