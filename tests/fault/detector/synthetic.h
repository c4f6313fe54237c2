// Synthetic traces for the detector's tests: a synchronous job simulated step by step, with
// every duration jittered by +-10% and one fault at a time injected.
//   pipeline  8 ranks, tp = 2 inside each of 4 nodes, pp = 4 across them (GPipe, 4
//             micro-batches): per micro-batch and stage a compute segment, a tp all-reduce,
//             and a rendezvous send/receive to the next stage (activations, tag 0) or back
//             (gradients, tag 1);
//   data      8 ranks, dp = 8 (2 per node): per bucket a compute segment and an all-reduce.
// Clocks: each rank's offset correction leaves an error of up to +-20 us.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "fault/detector/detector.h"

namespace loom::detect::testing {

enum class Topology { kPipeline, kData };

struct Fault {
  int slow_rank = -1;
  double rank_factor = 1.5;
  int link_src = -1, link_dst = -1;  // one slow directed link
  int slow_node = -1;                // every link out of this node slow
  double link_factor = 2.0;
  std::string slow_cpus;  // every rank pinned to these CPUs computes cpu_factor x as long
  double cpu_factor = 1.4;
};

class Simulator {
 public:
  Simulator(Topology t, uint64_t seed) : topo_(t), rng_(seed) {}

  // The CPUs each rank's compute is pinned to, reported with its evidence ("": not pinned).
  void set_cpus(std::vector<std::string> cpus) { cpus_ = std::move(cpus); }

  DetectorConfig Config() const {
    DetectorConfig c;
    c.world = 8;
    for (int r = 0; r < 8; ++r) {
      c.rank_node.push_back(r / 2);
      c.peer_class.push_back(topo_ == Topology::kPipeline ? r / 2 : 0);
    }
    c.node_names = {"n0", "n1", "n2", "n3"};
    return c;
  }

  std::vector<GroupInfo> Groups() const {
    std::vector<GroupInfo> g;
    if (topo_ == Topology::kData) return {{"dp", {0, 1, 2, 3, 4, 5, 6, 7}}};
    for (int s = 0; s < 4; ++s) g.push_back({"tp", {2 * s, 2 * s + 1}});
    for (int t = 0; t < 2; ++t) g.push_back({"pp", {t, t + 2, t + 4, t + 6}});
    return g;
  }

  // One step of every rank.
  std::vector<RankStep> Step(const Fault& f) {
    ++step_;
    std::vector<RankStep> out(8);
    std::vector<double> t(8), compute(8, 0);
    for (int r = 0; r < 8; ++r) {
      t[r] = now_ + 20e-6 * U();
      out[r].rank = r;
      out[r].step = step_;
      out[r].start_ns = Ns(t[r]);
      if (r < static_cast<int>(cpus_.size())) out[r].cpus = cpus_[r];
    }
    auto work = [&](int r, double base) {
      const bool slow_core = !f.slow_cpus.empty() && out[r].cpus == f.slow_cpus;
      const double d =
          base * J() * (r == f.slow_rank ? f.rank_factor : 1.0) * (slow_core ? f.cpu_factor : 1.0);
      t[r] += d;
      compute[r] += d;
    };
    auto collective = [&](const std::string& group, const std::vector<int>& members, double d) {
      double last = 0;
      for (int m : members) last = std::max(last, t[m]);
      const double end = last + d * J();
      for (int m : members) {
        Add(&out[m], "all_reduce", group, t[m], end, 1 << 20, -1, -1);
        t[m] = end;
      }
    };
    auto transfer = [&](int src, int dst, int tag) {
      double d = 1e-3 * J();
      if ((src == f.link_src && dst == f.link_dst) ||
          (src / 2 == f.slow_node && dst / 2 != src / 2))
        d *= f.link_factor;
      const double end = std::max(t[src], t[dst]) + d;
      const std::string g = "pp@" + std::to_string(src % 2);
      Add(&out[src], "send", g, t[src], end, 1 << 20, dst, tag);
      Add(&out[dst], "recv", g, t[dst], end, 1 << 20, src, tag);
      t[src] = t[dst] = end;
    };
    if (topo_ == Topology::kPipeline) {
      for (int mb = 0; mb < 4; ++mb) {
        for (int s = 0; s < 4; ++s) {
          for (int r : {2 * s, 2 * s + 1}) work(r, 1e-3);
          collective("tp@" + std::to_string(2 * s), {2 * s, 2 * s + 1}, 0.2e-3);
          if (s < 3) {
            for (int r : {2 * s, 2 * s + 1}) transfer(r, r + 2, 0);
          }
        }
      }
      for (int mb = 0; mb < 4; ++mb) {
        for (int s = 3; s >= 0; --s) {
          for (int r : {2 * s, 2 * s + 1}) work(r, 2e-3);
          collective("tp@" + std::to_string(2 * s), {2 * s, 2 * s + 1}, 0.2e-3);
          if (s > 0) {
            for (int r : {2 * s, 2 * s + 1}) transfer(r, r - 2, 1);
          }
        }
      }
    } else {
      std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
      for (int b = 0; b < 6; ++b) {
        for (int r = 0; r < 8; ++r) work(r, 2e-3);
        collective("dp@0", all, 0.5e-3);
      }
    }
    double end = 0;
    for (int r = 0; r < 8; ++r) {
      work(r, 1e-3);  // the optimizer step
      out[r].end_ns = Ns(t[r]);
      out[r].compute_ns = Ns(compute[r]);
      end = std::max(end, t[r]);
    }
    now_ = end + 1e-4;
    return out;
  }

  int64_t step() const { return step_; }

 private:
  void Add(RankStep* s, const std::string& op, const std::string& group, double enter, double exit,
           int64_t bytes, int peer, int tag) {
    CallEvidence c;
    c.op = op;
    c.group = group;
    c.seq = seq_[s->rank][group]++;
    c.enter_ns = Ns(enter + 20e-6 * U());
    c.exit_ns = Ns(exit + 20e-6 * U());
    c.bytes = bytes;
    c.peer = peer;
    c.tag = tag;
    s->calls.push_back(c);
  }
  double U() { return std::uniform_real_distribution<double>(-1, 1)(rng_); }
  double J() { return 1 + 0.1 * U(); }
  static int64_t Ns(double s) { return static_cast<int64_t>(s * 1e9); }

  Topology topo_;
  std::mt19937_64 rng_;
  double now_ = 1000;
  int64_t step_ = 0;
  std::map<std::string, uint64_t> seq_[8];
  std::vector<std::string> cpus_;
};

}  // namespace loom::detect::testing
