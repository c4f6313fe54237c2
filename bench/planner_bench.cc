// Planner search time at scale (never asserted in tests): the 1,008 B GPT on 3,072 A100s
// (Narayanan et al.), and clusters of 16,384 GPUs with context parallelism in the search
// (long sequences). Prints layouts enumerated / rejected / priced, simulations and wall time.
//   build/bench/planner_bench
#include <chrono>
#include <cstdio>
#include <string>

#include "coordinator/calibration.h"
#include "coordinator/cluster.h"
#include "coordinator/planner/search.h"
#include "model/config.h"

namespace loom {
namespace {

// The shipped manifest, grown (or shrunk) to `nodes` nodes of the same kind.
Result<Cluster> Scaled(const std::string& file, int nodes) {
  LOOM_ASSIGN_OR_RETURN(Cluster c, LoadCluster(std::string(LOOM_SOURCE_DIR) + "/" + file));
  Node proto = c.nodes[0];
  c.nodes.clear();
  for (int i = 0; i < nodes; ++i) {
    proto.name = proto.host = "node-" + std::to_string(i);
    c.nodes.push_back(proto);
  }
  return c;
}

struct Case {
  const char* name;
  const char* cluster;
  const char* calibration;
  int nodes;
  ModelConfig model;
  int64_t seq, batch;
};

int Run() {
  const Case cases[] = {
      {"1008B GPT, 3,072 A100 (SC'21)",
       "deploy/clusters/dgx-a100.yaml",
       "deploy/clusters/dgx-a100.calibration.json",
       384,
       {51200, 2048, 128, 160, 25600},
       2048,
       3072},
      {"1008B GPT, seq 8k, 16,384 H100",
       "deploy/clusters/dgx-h100.yaml",
       "",
       2048,
       {51200, 8192, 128, 160, 25600},
       8192,
       4096},
      {"175B GPT, seq 32k, 16,384 H100",
       "deploy/clusters/dgx-h100.yaml",
       "",
       2048,
       {51200, 32768, 96, 96, 12288},
       32768,
       1024},
      {"1008B GPT, seq 2k, 16,384 H100",
       "deploy/clusters/dgx-h100.yaml",
       "",
       2048,
       {51200, 2048, 128, 160, 25600},
       2048,
       16384},
  };
  std::printf("%-34s %8s %9s %9s %7s %6s %9s  best plan\n", "case", "devices", "layouts",
              "rejected", "priced", "sims", "search s");
  for (const Case& c : cases) {
    Result<Cluster> cluster = Scaled(c.cluster, c.nodes);
    if (!cluster.ok()) {
      std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
      return 1;
    }
    Calibration cal;
    if (c.calibration[0] != '\0') {
      Result<Calibration> loaded =
          LoadCalibration(std::string(LOOM_SOURCE_DIR) + "/" + c.calibration);
      if (!loaded.ok()) {
        std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
        return 1;
      }
      cal = *loaded;
    }
    PlanJob job;
    job.model = c.model;
    job.seq = c.seq;
    job.global_batch = c.batch;
    job.precision = Precision::kBf16;
    job.selective_recompute = true;
    Result<SearchResult> r = SearchPlans(job, *cluster, cal, 5);
    if (!r.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name, r.status().ToString().c_str());
      return 1;
    }
    const Prediction& best = r->plans[0];
    std::printf("%-34s %8d %9lld %9lld %7lld %6lld %9.3f  %s, %.0f TFLOP/s/dev\n", c.name,
                r->placement.world, static_cast<long long>(r->stats.enumerated),
                static_cast<long long>(r->stats.rejected_memory),
                static_cast<long long>(r->stats.evaluated),
                static_cast<long long>(r->stats.simulations), r->stats.seconds,
                best.candidate.ToString().c_str(), best.tflops_per_device);
  }
  return 0;
}

}  // namespace
}  // namespace loom

int main() {
  return loom::Run();
}
