// Layout enumeration, memory pruning and branch-and-bound ranking.
#include "coordinator/planner/search.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "model/config.h"

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

// Why candidates were skipped, kept only when no layout survived, so that the error names the
// rules that failed (the first few distinct ones, in the order the search met them).
class SkipLog {
 public:
  void Add(std::string why) {
    if (reasons_.size() < 4 && std::find(reasons_.begin(), reasons_.end(), why) == reasons_.end()) {
      reasons_.push_back(std::move(why));
    }
  }
  std::string Text() const {
    std::string out;
    for (const std::string& r : reasons_) out += (out.empty() ? "" : "; ") + r;
    return out;
  }

 private:
  std::vector<std::string> reasons_;
};

std::string N(int64_t v) {
  return std::to_string(v);
}

// Uneven splits of `layers` over pp >= 2 pipeline chunks (pp * vpp of them) that the search also
// prices: the middle chunks hold `mid` layers each, for the two smallest `mid` that leave the ends
// lighter than twice `mid` (at least one layer each); the first chunk takes the odd layer, since
// the head on the last is heavier than the embedding. Llama 3 405B: 126 layers over 16 stages
// gives 7 | 8 x 14 | 7, over 16 x 2 virtual stages 3 | 4 x 30 | 3.
std::vector<std::pair<int, int>> UnevenSplits(int64_t layers, int pp) {
  std::vector<std::pair<int, int>> out;
  if (pp < 2 || layers < pp) return out;
  if (pp == 2) {
    if (layers % 2 != 0)
      out.push_back({static_cast<int>(layers / 2 + 1), static_cast<int>(layers / 2)});
    return out;
  }
  const int64_t lo = (layers + pp - 1) / pp;
  for (int64_t mid = lo; mid <= lo + 1; ++mid) {
    const int64_t ends = layers - (pp - 2) * mid;
    if (ends < 2 || ends >= 2 * mid) continue;
    out.push_back({static_cast<int>(ends - ends / 2), static_cast<int>(ends / 2)});
  }
  return out;
}

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
  const DeviceType& type = cluster.types[static_cast<size_t>(place.type)];
  if (type.Peak(job.precision) <= 0) {
    // Only the bf16 peak is optional. The precision may come from the job's `precision`, its
    // plan.precision or --precision: the planner does not know which.
    const std::string where = type.peak_bf16_where.empty()
                                  ? "device type '" + type.name + "': peak_flops.bf16"
                                  : type.peak_bf16_where;
    return InvalidArgument(where + ": missing; a plan in " + PrecisionName(job.precision) +
                           " needs the device type's " + PrecisionName(job.precision) + " peak");
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
  constraints.ffn = m.ffn();
  if (m.llama()) constraints.kv_heads = m.kv();
  std::vector<Enumerated> fits;
  std::vector<int> tps;
  for (int t : Divisors(place.ranks_per_node, place.ranks_per_node)) {
    if (m.heads % t == 0 && m.ffn() % t == 0) tps.push_back(t);
  }
  std::vector<Recompute> modes{Recompute::kNone, Recompute::kFull};
  if (job.selective_recompute) modes.push_back(Recompute::kSelective);
  if (job.recompute) modes = {*job.recompute};

  // Every candidate the runtime would take, priced for memory; with `log`, only why candidates
  // were skipped (the second pass when nothing survived the first).
  auto enumerate = [&](SkipLog* log) -> Status {
    auto skip = [log](auto&& why) {
      if (log != nullptr) log->Add(why());
    };
    const std::string world_s = N(world) + " devices";
    for (int tp : Choices(job.tp, tps)) {
      if (world % tp != 0) {
        skip([&] { return "tp (" + N(tp) + ") does not divide the " + world_s; });
        continue;
      }
      for (int cp : Choices(job.cp, Divisors(world / tp, std::max<int64_t>(1, job.seq / 2)))) {
        if (cp > 1 && job.seq % (2 * cp) != 0) {
          skip([&] {
            return "data.seq (" + N(job.seq) + ") must be divisible by 2*cp (" + N(2 * cp) +
                   ") for the load-balanced causal split";
          });
          continue;
        }
        for (int pp : Choices(job.pp, Divisors(world, m.layers))) {
          const int64_t mp = static_cast<int64_t>(tp) * cp * pp;
          if (world % mp != 0) {
            skip([&] {
              return "tp*cp*pp = " + N(tp) + "*" + N(cp) + "*" + N(pp) + " = " + N(mp) +
                     " does not divide the " + world_s;
            });
            continue;
          }
          const int dp = static_cast<int>(world / mp);
          if (job.dp && *job.dp != dp) {
            skip([&] {
              return "parallel.dp is " + N(*job.dp) + " but the " + world_s +
                     " over tp*cp*pp = " + N(mp) + " leave dp = " + N(dp);
            });
            continue;
          }
          if (job.global_batch % dp != 0) {
            skip([&] {
              return "data.global_batch (" + N(job.global_batch) + ") must be divisible by dp (" +
                     N(dp) + ")";
            });
            continue;
          }
          const int64_t per_rank = job.global_batch / dp;
          for (int mb : Choices(job.micro_batch, Divisors(per_rank, kMaxMicroBatch))) {
            if (per_rank % mb != 0) {
              skip([&] {
                return "data.micro_batch (" + N(mb) +
                       ") must divide global_batch/dp = " + N(job.global_batch) + "/" + N(dp) +
                       " = " + N(per_rank) + " (leave it out and the planner chooses it)";
              });
              continue;
            }
            const int64_t micro = per_rank / mb;
            // (schedule, vpp) pairs.
            std::vector<std::pair<ScheduleKind, int>> scheds;
            // vpp: divisors of the layers per stage, rounded down and up (uneven stages).
            std::vector<int> vpps = Divisors(m.layers / pp, m.layers / pp);
            for (int v : Divisors((m.layers + pp - 1) / pp, (m.layers + pp - 1) / pp)) {
              if (std::find(vpps.begin(), vpps.end(), v) == vpps.end()) vpps.push_back(v);
            }
            for (int vpp : Choices(job.vpp, vpps)) {
              const bool stages_fixed = job.first_stage_layers || job.last_stage_layers;
              if (m.layers % (static_cast<int64_t>(pp) * vpp) != 0 && !stages_fixed &&
                  UnevenSplits(m.layers, pp * vpp).empty()) {
                skip([&] {
                  return "model.layers (" + N(m.layers) + ") must be divisible by pp*vpp (" +
                         N(pp) + "*" + N(vpp) + " = " + N(int64_t{pp} * vpp) + ")" +
                         UnevenHint(m.layers, int64_t{pp} * vpp);
                });
                continue;
              }
              ScheduleKind kind = vpp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1F1B;
              if (job.schedule) kind = *job.schedule;
              if (vpp > 1 && (pp < 2 || kind != ScheduleKind::kInterleaved || micro % pp != 0)) {
                skip([&] {
                  return "vpp " + N(vpp) + " needs pp >= 2 (pp " + N(pp) +
                         "), the interleaved schedule and a number of micro-batches (" + N(micro) +
                         ") divisible by pp";
                });
                continue;
              }
              if (vpp == 1 && kind == ScheduleKind::kInterleaved) {
                skip([] { return std::string("the interleaved schedule needs vpp > 1"); });
                continue;
              }
              scheds.push_back({kind, vpp});
            }
            for (auto [kind, vpp] : scheds) {
              // Stage splits: the job's, or even (when the layers divide) and the uneven ones.
              std::vector<std::pair<int, int>> splits;
              if (job.first_stage_layers || job.last_stage_layers) {
                splits.push_back({static_cast<int>(job.first_stage_layers.value_or(0)),
                                  static_cast<int>(job.last_stage_layers.value_or(0))});
              } else {
                if (m.layers % (int64_t{pp} * vpp) == 0) splits.push_back({0, 0});
                for (auto s : UnevenSplits(m.layers, pp * vpp)) splits.push_back(s);
              }
              for (auto [first_layers, last_layers] : splits)
                for (int zero : Choices(job.zero, std::vector<int>{0, 1, 2, 3})) {
                  if (!job.zero && zero > 0 && dp * cp == 1) continue;  // nothing to shard
                  std::vector<int> sps{0};
                  if (tp > 1 && (job.seq / cp) % tp == 0) sps.push_back(1);
                  if (job.sp) sps = {*job.sp ? 1 : 0};
                  for (int sp : sps) {
                    for (Recompute rc : modes) {
                      Candidate c;
                      c.layout = Layout{tp, cp, pp, vpp, dp, zero, sp == 1};
                      c.layout.first_stage_layers = first_layers;
                      c.layout.last_stage_layers = last_layers;
                      c.micro_batch = mb;
                      c.recompute = rc;
                      c.schedule = kind;
                      // The runtime's own checks (parallel/layout.h): fixed fields skip the
                      // filters above, and nothing the workers would refuse may be proposed.
                      const Status valid = c.layout.Validate(world, constraints);
                      if (!valid.ok()) {
                        skip([&] { return valid.message(); });
                        continue;
                      }
                      if (log != nullptr) continue;
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
    return Status::Ok();
  };
  LOOM_RETURN_IF_ERROR(enumerate(nullptr));
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
      SkipLog log;
      LOOM_RETURN_IF_ERROR(enumerate(&log));
      std::string why = log.Text();
      if (why.empty()) {
        why = "no tensor-parallel size divides both model.heads (" + N(m.heads) +
              ") and the MLP width (" + N(m.ffn()) + ") within a node of " +
              N(place.ranks_per_node) + " ranks";
      }
      return InvalidArgument("no layout satisfies the job's constraints on " + N(world) +
                             " devices: " + why);
    }
    const Prediction& r = *res.closest_rejected;
    char gb[96];
    std::snprintf(gb, sizeof(gb), "%.1f GB on pipeline stage %d but a device offers %.1f GB",
                  r.peak_memory / 1e9, r.peak_stage, r.capacity / 1e9);
    return InvalidArgument("no layout fits in memory: the closest, " + r.candidate.ToString() +
                           ", needs " + gb + " after " +
                           std::to_string(static_cast<int>(job.headroom * 100)) + "% headroom");
  }
  return res;
}

}  // namespace loom
