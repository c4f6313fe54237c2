// Plan reports: table, explanation and JSON.
#include "coordinator/planner/report.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "coordinator/planner/model_math.h"
#include "model/config.h"

namespace loom {
namespace {

std::string Fmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

// "1.23 s" / "45.6 ms" / "789 us".
std::string Secs(double s) {
  if (s >= 1) return Fmt("%.2f s", s);
  if (s >= 1e-3) return Fmt("%.1f ms", s * 1e3);
  return Fmt("%.0f us", s * 1e6);
}

std::string Bytes(double b) {
  if (b >= 1e9) return Fmt("%.1f GB", b / 1e9);
  if (b >= 1e6) return Fmt("%.1f MB", b / 1e6);
  return Fmt("%.0f kB", b / 1e3);
}

std::string Rate(double bytes_per_s) {
  return Fmt("%.1f GB/s", bytes_per_s / 1e9);
}

std::string FlopRate(double flops) {
  return flops >= 1e12 ? Fmt("%.0f TFLOP/s", flops / 1e12) : Fmt("%.1f GFLOP/s", flops / 1e9);
}

std::string Count(double n) {
  return n >= 1e9 ? Fmt("%.2f B", n / 1e9) : Fmt("%.2f M", n / 1e6);
}

// TFLOP/s with three significant digits below 10 (CPU ranks reach a fraction of one).
std::string Tflops(double t) {
  return t >= 10 ? Fmt("%.1f", t) : Fmt("%.3g", t);
}

std::string Header(const SearchResult& r, const PlanJob& job, const Cluster& c) {
  const ModelConfig& m = job.model;
  const RankPlacement& p = r.placement;
  std::string s = Fmt(
      "model: %s parameters (%s: layers %lld, hidden %lld, heads %lld%s, vocab %lld), seq "
      "%lld, global batch %lld, %s\n",
      Count(TotalParams(m)).c_str(), ModelFamilyName(m.family), static_cast<long long>(m.layers),
      static_cast<long long>(m.hidden), static_cast<long long>(m.heads),
      m.llama() ? Fmt(", %lld KV heads, SwiGLU %lld%s", static_cast<long long>(m.kv()),
                      static_cast<long long>(m.ffn()),
                      m.tie_embeddings ? ", tied output" : ", untied output")
                      .c_str()
                : "",
      static_cast<long long>(m.vocab), static_cast<long long>(job.seq),
      static_cast<long long>(job.global_batch), PrecisionName(job.precision));
  s += Fmt("cluster %s: %d ranks on %zu node%s x %d %s (%s memory, %s peak per rank",
           c.name.c_str(), p.world, p.nodes.size(), p.nodes.size() == 1 ? "" : "s",
           p.ranks_per_node, c.types[static_cast<size_t>(p.type)].name.c_str(),
           Bytes(r.hardware.memory).c_str(), FlopRate(r.hardware.peak).c_str());
  if (p.devices_per_rank > 1) s += Fmt(", %d cores per rank", p.devices_per_rank);
  s += Fmt("), headroom %.0f%%\n", job.headroom * 100);
  if (!r.note.empty()) s += r.note + "\n";
  return s;
}

const char* OnOff(bool b) {
  return b ? "on" : "off";
}

}  // namespace

std::string RankMap(const RankPlacement& p, const Cluster& c, int max_lines) {
  std::vector<std::string> lines;
  const int n = static_cast<int>(p.nodes.size());
  for (int i = 0; i < n; ++i) {
    const int first = i * p.ranks_per_node, last = first + p.ranks_per_node - 1;
    const std::string& node = c.nodes[static_cast<size_t>(p.nodes[static_cast<size_t>(i)])].name;
    std::string devices = p.devices_per_rank > 1
                              ? Fmt("cores %d-%d", 0, p.ranks_per_node * p.devices_per_rank - 1)
                              : Fmt("devices %d-%d", p.DeviceOf(first), p.DeviceOf(last));
    if (first == last) {
      lines.push_back(Fmt("  rank %d -> %s %s", first, node.c_str(), devices.c_str()));
    } else {
      lines.push_back(Fmt("  ranks %d-%d -> %s %s", first, last, node.c_str(), devices.c_str()));
    }
  }
  std::string s;
  if (static_cast<int>(lines.size()) <= max_lines) {
    for (const std::string& l : lines) s += l + "\n";
    return s;
  }
  const int head = max_lines / 2, tail = max_lines - head - 1;
  for (int i = 0; i < head; ++i) s += lines[static_cast<size_t>(i)] + "\n";
  s += Fmt("  ... (%d more nodes)\n", static_cast<int>(lines.size()) - head - tail);
  for (size_t i = lines.size() - static_cast<size_t>(tail); i < lines.size(); ++i) {
    s += lines[i] + "\n";
  }
  return s;
}

// "7 | 8 x 14 | 7": the layers of each pipeline chunk, runs of equal ones collapsed.
static std::string StageText(const Layout& L, int64_t layers) {
  Result<std::vector<int>> split = L.ChunkLayers(layers);
  if (!split.ok()) return "?";
  std::string s;
  for (size_t i = 0; i < split->size();) {
    size_t j = i;
    while (j < split->size() && (*split)[j] == (*split)[i]) ++j;
    s += (s.empty() ? "" : " | ") + std::to_string((*split)[i]) +
         (j - i > 1 ? " x " + std::to_string(j - i) : "");
    i = j;
  }
  return s;
}

std::string PlanTable(const SearchResult& r, const PlanJob& job, const Cluster& c) {
  std::string s = Header(r, job, c);
  s += Fmt(
      "searched %lld layouts (%lld do not fit in memory), priced %lld, %lld pipeline "
      "simulations, in %.3f s\n\n",
      static_cast<long long>(r.stats.enumerated), static_cast<long long>(r.stats.rejected_memory),
      static_cast<long long>(r.stats.evaluated), static_cast<long long>(r.stats.simulations),
      r.stats.seconds);
  s += "  #  tp  cp  pp vpp    dp zero  sp  mb recompute schedule      step    tokens/s  "
       "TFLOP/s/dev   MFU   memory\n";
  int i = 0;
  for (const Prediction& p : r.plans) {
    const Layout& L = p.candidate.layout;
    s += Fmt("%3d %3d %3d %3d %3d %5d %4d %3s %3lld %-9s %-11s %9s %11.0f %12s %5.1f%% %8s\n", ++i,
             L.tp, L.cp, L.pp, L.vpp, L.dp, L.zero, OnOff(L.sp && L.tp > 1),
             static_cast<long long>(p.candidate.micro_batch), RecomputeName(p.candidate.recompute),
             ScheduleKindName(p.candidate.schedule), Secs(p.time.step).c_str(), p.tokens_per_s,
             Tflops(p.tflops_per_device).c_str(), 100 * p.mfu, Bytes(p.peak_memory).c_str());
    if (L.uneven()) s.insert(s.size() - 1, "  stages " + StageText(L, job.model.layers));
  }
  s += "\nTFLOP/s/dev counts recomputed forwards (as Megatron-LM reports); MFU does not.\n";
  return s;
}

namespace {

struct Part {
  const char* name;
  double seconds;
};

std::vector<Part> Parts(const StepBreakdown& t) {
  return {{"compute (forward, backward, recompute)", t.compute},
          {"pipeline bubble (incl. waits for transfers)", t.bubble},
          {"tensor-parallel collectives (exposed)", t.tp},
          {"context-parallel ring (exposed)", t.cp},
          {"ZeRO-2/3 per-micro-batch traffic (exposed)", t.zero},
          {"links shared by several dimensions (exposed)", t.shared},
          {"compute slowed by overlapped transfers", t.slowdown},
          {"data-parallel reduction / gather (exposed)", t.dp},
          {"tied-embedding exchange (exposed)", t.pp},
          {"optimizer step", t.optimizer}};
}

std::string MemoryTable(const Prediction& p) {
  std::string s = "  stage   weights     grads optimizer activations    edges  buffers     total\n";
  const int n = static_cast<int>(p.stage_memory.size());
  auto row = [&](int i) {
    const MemoryBreakdown& m = p.stage_memory[static_cast<size_t>(i)];
    s += Fmt("  %5d %9s %9s %9s %11s %8s %8s %9s%s\n", i, Bytes(m.weights).c_str(),
             Bytes(m.grads).c_str(), Bytes(m.optimizer).c_str(), Bytes(m.activations).c_str(),
             Bytes(m.edges).c_str(), Bytes(m.buffers).c_str(), Bytes(m.total()).c_str(),
             i == p.peak_stage ? "  <- peak" : "");
  };
  if (n <= 8) {
    for (int i = 0; i < n; ++i) row(i);
  } else {
    for (int i = 0; i < 3; ++i) row(i);
    s += Fmt("  ... (%d stages)\n", n - 5);
    for (int i = n - 2; i < n; ++i) row(i);
  }
  s += Fmt("  capacity %s per rank after headroom\n", Bytes(p.capacity).c_str());
  return s;
}

}  // namespace

std::string PlanExplain(const SearchResult& r, const PlanJob& job, const Cluster& c) {
  const Prediction& w = r.plans[0];
  const Layout& L = w.candidate.layout;
  const Hardware& hw = r.hardware;
  std::string s = "\nwhy plan #1: " + w.candidate.ToString() + "\n";
  s += Fmt(
      "  %lld micro-batches of %lld per pipeline per step; predicted step %s, %.0f "
      "tokens/s, %s TFLOP/s per rank, MFU %.1f%%\n\n",
      static_cast<long long>(w.micro_batches), static_cast<long long>(w.candidate.micro_batch),
      Secs(w.time.step).c_str(), w.tokens_per_s, Tflops(w.tflops_per_device).c_str(), 100 * w.mfu);
  if (L.uneven()) {
    s += Fmt(
        "  uneven pipeline stages: %s layers (parallel.first_stage_layers %d, "
        "last_stage_layers %d): the first and last ranks also run the embedding and the head\n\n",
        StageText(L, job.model.layers).c_str(), L.first_stage_layers, L.last_stage_layers);
  }
  s += "  where the step goes (busiest pipeline rank):\n";
  for (const Part& p : Parts(w.time)) {
    if (p.seconds <= 0) continue;
    s += Fmt("    %-46s %10s  %5.1f%%\n", p.name, Secs(p.seconds).c_str(),
             100 * p.seconds / w.time.step);
  }
  const CommBytes& b = w.bytes;
  s += Fmt("\n  traffic per step (sent by each rank) and how long its links are busy:\n");
  s +=
      Fmt("    tp %s, cp %s, pp %s, dp %s; NVLink busy %s (%.0f%% of the step), "
          "network busy %s (%.0f%%)\n",
          Bytes(b.tp).c_str(), Bytes(b.cp).c_str(), Bytes(b.pp).c_str(), Bytes(b.dp).c_str(),
          Secs(w.links.busy[kIntraNode]).c_str(), 100 * w.links.busy[kIntraNode] / w.time.step,
          Secs(w.links.busy[kInterNode]).c_str(), 100 * w.links.busy[kInterNode] / w.time.step);
  s += "\n  links each dimension uses (worst group, effective per rank):\n";
  PathCache paths(c, r.placement, hw);
  auto path = [&](const char* name, GroupPath g, const char* what, std::string note = "") {
    if (g.size <= 1) return;
    if (g.measured != nullptr) note = "; priced from the calibration's measured collectives";
    s += Fmt("    %-4s %4d ranks over %4d node%s: %s, latency %s (%s)%s\n", name, g.size, g.nodes,
             g.nodes == 1 ? " " : "s", Rate(g.bandwidth).c_str(), Secs(g.latency).c_str(), what,
             note.c_str());
  };
  path("tp", paths.Ring(1, L.tp), "all-reduce / all-gather + reduce-scatter per layer");
  path("cp", paths.Hop(L.tp, L.cp), "K/V ring hops");
  const GroupPath dp = paths.Ring(L.tp, L.dp * L.cp);
  path("dp", dp,
       L.zero == 3 ? "ZeRO-3 gathers and reduce-scatters over dp x cp"
                   : "gradient reduction over dp x cp",
       L.zero == 3 && dp.nodes > 1 && hw.zero3_rank_bandwidth > 0
           ? "; ZeRO-3 at most " + Rate(hw.zero3_rank_bandwidth) +
                 " per rank (the calibration's zero3_rank_bandwidth)"
           : "");
  path("pp", paths.Hop(L.tp * L.cp * L.dp, L.pp), "activation / gradient sends");
  s += "\n  peak memory per pipeline stage:\n" + MemoryTable(w);
  if (w.capacity > 0 && w.peak_memory > 0.95 * w.capacity) {
    // At the memory edge: say what keeps it safe, and how to ask for room instead.
    s += Fmt(
        "  at the memory edge: %.1f%% of the capacity after headroom. What keeps it safe is the "
        "headroom itself, %s per rank (%.0f%% of the device), which the model leaves for what it "
        "does not count (allocator fragmentation, NCCL and cuBLAS workspaces, the CUDA context); "
        "a larger plan.headroom makes the search prefer layouts with room\n",
        100 * w.peak_memory / w.capacity, Bytes(hw.memory - w.capacity).c_str(),
        100 * job.headroom);
  }

  if (r.plans.size() > 1) {
    s += "\n  against the runners-up (their step minus the winner's, by cause):\n";
    for (size_t i = 1; i < r.plans.size(); ++i) {
      const Prediction& o = r.plans[i];
      s += Fmt("    #%zu %s: %+.1f%%", i + 1, o.candidate.ToString().c_str(),
               100 * (o.time.step / w.time.step - 1));
      std::vector<Part> a = Parts(w.time), b = Parts(o.time);
      std::vector<std::pair<double, const char*>> diff;
      for (size_t k = 0; k < a.size(); ++k)
        diff.push_back({b[k].seconds - a[k].seconds, a[k].name});
      std::sort(diff.begin(), diff.end(), [](const auto& x, const auto& y) {
        return std::fabs(x.first) > std::fabs(y.first);
      });
      for (size_t k = 0; k < 2 && k < diff.size(); ++k) {
        if (std::fabs(diff[k].first) < 1e-6 * w.time.step) break;
        std::string what = diff[k].second;
        what = what.substr(0, what.find(" ("));
        s += Fmt(
            "%s %s %s", k == 0 ? " —" : ",", what.c_str(),
            (diff[k].first > 0 ? "+" + Secs(diff[k].first) : "-" + Secs(-diff[k].first)).c_str());
      }
      s += "\n";
    }
  }
  s += Fmt(
      "\n  search: %lld layouts satisfy the divisibility rules, %lld rejected for memory, "
      "%lld priced before the bound stopped the search\n",
      static_cast<long long>(r.stats.enumerated), static_cast<long long>(r.stats.rejected_memory),
      static_cast<long long>(r.stats.evaluated));
  s +=
      Fmt("  hardware model: GEMMs at %.0f%% of %s%s, memory-bound kernels at %s, "
          "%s per kernel\n",
          100 * hw.gemm_efficiency, FlopRate(hw.peak).c_str(),
          hw.gemm.empty() ? "" : " (measured GEMM samples instead)",
          Rate(hw.memory_bandwidth).c_str(), Secs(hw.op_overhead).c_str());
  if (hw.sync_wait > 0) {
    s += Fmt(
        "  every collective and hop also waits %s for its latest rank (calibration's sync_wait)\n",
        Secs(hw.sync_wait).c_str());
  }
  if (hw.type.core_share < 1) {
    s += Fmt(
        "  ranks share cores: each computes at %.2f of a core, %.0f%% of it lost to the sharing "
        "(calibration's time_sharing)\n",
        hw.type.core_share * hw.time_sharing, 100 * (1 - hw.time_sharing));
  }
  s += "\n  rank -> (node, device) (tp fastest, then cp, dp, pp):\n" + RankMap(r.placement, c, 8);
  return s;
}

std::string PlanJson(const SearchResult& r, const PlanJob& job, const Cluster& c) {
  using nlohmann::json;
  json j;
  j["job"] = job.file;
  j["precision"] = PrecisionName(job.precision);
  j["cluster"] = c.name;
  j["world"] = r.placement.world;
  j["search"] = {{"enumerated", r.stats.enumerated},
                 {"rejected_memory", r.stats.rejected_memory},
                 {"evaluated", r.stats.evaluated},
                 {"simulations", r.stats.simulations},
                 {"seconds", r.stats.seconds}};
  if (!r.note.empty()) j["note"] = r.note;
  j["plans"] = json::array();
  for (const Prediction& p : r.plans) {
    const Layout& L = p.candidate.layout;
    json o;
    o["layout"] = {{"tp", L.tp},
                   {"cp", L.cp},
                   {"pp", L.pp},
                   {"vpp", L.vpp},
                   {"dp", L.dp},
                   {"zero", L.zero},
                   {"sp", L.sp && L.tp > 1}};
    if (L.first_stage_layers > 0) o["layout"]["first_stage_layers"] = L.first_stage_layers;
    if (L.last_stage_layers > 0) o["layout"]["last_stage_layers"] = L.last_stage_layers;
    o["micro_batch"] = p.candidate.micro_batch;
    o["micro_batches"] = p.micro_batches;
    o["recompute"] = RecomputeName(p.candidate.recompute);
    o["schedule"] = ScheduleKindName(p.candidate.schedule);
    o["step_seconds"] = p.time.step;
    o["tokens_per_second"] = p.tokens_per_s;
    o["tflops_per_device"] = p.tflops_per_device;
    o["mfu"] = p.mfu;
    o["time"] = {{"compute", p.time.compute},
                 {"bubble", p.time.bubble},
                 {"tp", p.time.tp},
                 {"cp", p.time.cp},
                 {"zero", p.time.zero},
                 {"shared_links", p.time.shared},
                 {"overlap_slowdown", p.time.slowdown},
                 {"dp", p.time.dp},
                 {"pp", p.time.pp},
                 {"optimizer", p.time.optimizer}};
    o["bytes_sent"] = {
        {"tp", p.bytes.tp}, {"cp", p.bytes.cp}, {"pp", p.bytes.pp}, {"dp", p.bytes.dp}};
    o["link_busy_seconds"] = {{"intra_node", p.links.busy[kIntraNode]},
                              {"inter_node", p.links.busy[kInterNode]}};
    o["memory"] = {{"peak_bytes", p.peak_memory},
                   {"peak_stage", p.peak_stage},
                   {"capacity_bytes", p.capacity}};
    json stages = json::array();
    for (const MemoryBreakdown& m : p.stage_memory) {
      stages.push_back({{"weights", m.weights},
                        {"grads", m.grads},
                        {"optimizer", m.optimizer},
                        {"activations", m.activations},
                        {"edges", m.edges},
                        {"buffers", m.buffers},
                        {"total", m.total()}});
    }
    o["memory"]["stages"] = stages;
    j["plans"].push_back(o);
  }
  json ranks = json::array();
  const RankPlacement& p = r.placement;
  for (int rank = 0; rank < p.world; ++rank) {
    ranks.push_back({c.nodes[static_cast<size_t>(p.NodeOf(rank))].name, p.DeviceOf(rank)});
  }
  j["ranks"] = ranks;  // rank -> [node, first device]
  return j.dump(2) + "\n";
}

}  // namespace loom
