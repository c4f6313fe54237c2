// How long a Prometheus scrape of the coordinator takes for a large job: 1,024 simulated ranks
// (tp 8 x pp 8 x dp 16 on 128 nodes) send synthetic step reports into a JobState; the job's
// metrics (coordinator/metrics) are scraped over HTTP from the coordinator's own server, side by
// side with the same for 8 ranks, in one run. Also the aggregation's cost per step.
// Last line: scrape_ms_1024=... scrape_ms_8=... ratio=... series_1024=... bytes_1024=...
//            observe_ms_per_step_1024=... target_ms=100
#include <algorithm>
#include <utility>  // before Boost.Asio, whose awaitable.hpp needs std::exchange

#include <boost/asio.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/metrics/http_server.h"
#include "coordinator/metrics/job_metrics.h"
#include "coordinator/metrics/status_routes.h"

#include <prometheus/text_serializer.h>

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string Get(int port, const std::string& path) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket s(io);
  s.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: bench\r\n\r\n";
  boost::asio::write(s, boost::asio::buffer(req));
  std::string out;
  boost::system::error_code ec;
  char buf[1 << 16];
  for (;;) {
    const size_t n = s.read_some(boost::asio::buffer(buf), ec);
    out.append(buf, n);
    if (ec) break;
  }
  return out;
}

struct Figures {
  double scrape_ms = 0, observe_ms = 0;
  double collect_ms = 0, serialize_ms = 0;  // of the scrape, in this process
  size_t bytes = 0, series = 0;
};

Figures Measure(int tp, int pp, int dp, int ranks_per_node, int steps, int scrapes) {
  JobSpec spec;
  spec.token = "bench";
  spec.layout.tp = tp;
  spec.layout.pp = pp;
  spec.layout.dp = dp;
  spec.job_yaml = "steps: 1000\n";
  spec.steps = 1000;
  spec.tokens_per_step = 1 << 20;
  spec.flops_per_step = 1e15;
  spec.peak_flops = 1e15;
  const int world = spec.layout.world();
  std::vector<std::string> names, hosts;
  for (int r = 0; r < world; ++r) {
    spec.node.push_back(r / ranks_per_node);
    spec.device.push_back(r % ranks_per_node);
  }
  for (int n = 0; n <= (world - 1) / ranks_per_node; ++n) {
    char name[32];
    std::snprintf(name, sizeof(name), "gpu-node-%03d", n);
    names.push_back(name);
    hosts.push_back(name);
  }
  JobState job(spec);
  for (int r = 0; r < world; ++r) {
    proto::RegisterRequest req;
    req.set_rank(r);
    req.set_world_size(world);
    req.set_host(hosts[static_cast<size_t>(r / ranks_per_node)]);
    req.set_pid(1000 + r);
    if (!job.Register(req, 0).ok()) std::abort();
  }
  JobMetrics metrics;
  metrics.SetPlan(PlanRecordOf(spec, names, hosts, "bench.yaml", 0), spec.flops_per_step,
                  spec.peak_flops);
  std::vector<double> observe;
  for (int s = 1; s <= steps; ++s) {
    for (int r = 0; r < world; ++r) {
      proto::StepReport rep;
      rep.set_rank(r);
      rep.set_step(s);
      rep.set_loss(3.0);
      rep.set_step_s(1.0 + 0.001 * (r % 7));
      for (const char* g : {"tp", "dp", "pp", "embedding"}) {
        proto::CollectiveSummary& c = *rep.add_collectives();
        c.set_op("all_reduce");
        c.set_group(g);
        c.set_count(10);
        c.set_bytes(1 << 24);
        c.set_busy_s(0.1);
        c.set_wait_s(0.02);
      }
      for (const char* cat : {"params", "grads", "optimizer", "activations", "comm", "other"}) {
        proto::MemoryUse& m = *rep.add_memory();
        m.set_category(cat);
        m.set_bytes(1 << 30);
        m.set_peak_bytes(1 << 31);
      }
      rep.set_snapshot_step(s - 1);
      if (!job.Report(rep, s).ok()) std::abort();
    }
    const auto t0 = Clock::now();
    metrics.Observe(job, {}, s);
    observe.push_back(Ms(t0));
  }
  StatusSource source;
  source.view = [&metrics](size_t n) { return metrics.ViewJson(n); };
  source.metrics = &metrics;
  auto http = HttpServer::Start("127.0.0.1", 0,
                                [source](const std::string& t) { return ServeStatus(source, t); });
  if (!http.ok()) {
    std::fprintf(stderr, "%s\n", http.status().ToString().c_str());
    std::exit(1);
  }
  Figures f;
  {
    std::vector<double> c, z;
    for (int i = 0; i < 10; ++i) {
      auto t0 = Clock::now();
      auto fam = metrics.Collect();
      c.push_back(Ms(t0));
      t0 = Clock::now();
      auto text = prometheus::TextSerializer().Serialize(fam);
      z.push_back(Ms(t0));
    }
    f.collect_ms = Median(c);
    f.serialize_ms = Median(z);
  }
  std::vector<double> times;
  std::string body;
  for (int i = 0; i < scrapes; ++i) {
    const auto t0 = Clock::now();
    body = Get((*http)->port(), "/metrics");
    times.push_back(Ms(t0));
  }
  f.scrape_ms = Median(times);
  f.observe_ms = Median(observe);
  f.bytes = body.size();
  for (size_t p = body.find("\nloom_"); p != std::string::npos; p = body.find("\nloom_", p + 1)) {
    ++f.series;
  }
  return f;
}

}  // namespace
}  // namespace loom

int main() {
  using loom::Measure;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf(
      "scrape_bench: %u cores; /metrics over HTTP on 127.0.0.1, median of 20 scrapes, "
      "after 5 steps of synthetic reports (4 dimensions, 6 memory categories per rank)\n",
      cores);
  const loom::Figures small = Measure(2, 2, 2, 8, 5, 20);
  const loom::Figures big = Measure(8, 8, 16, 8, 5, 20);
  std::printf("%6s %10s %11s %13s %10s %10s %16s\n", "ranks", "scrape ms", "(collect ms",
              "serialize ms)", "series", "bytes", "observe ms/step");
  for (const auto& [n, f] : {std::pair<int, const loom::Figures*>{8, &small}, {1024, &big}}) {
    std::printf("%6d %10.2f %11.2f %13.2f %10zu %10zu %16.2f\n", n, f->scrape_ms, f->collect_ms,
                f->serialize_ms, f->series, f->bytes, f->observe_ms);
  }
  std::printf(
      "1024 ranks against 8: %.1fx the time for %.1fx the series; against the 100 ms "
      "target: %.3f\n",
      big.scrape_ms / small.scrape_ms,
      static_cast<double>(big.series) / static_cast<double>(small.series), big.scrape_ms / 100.0);
  std::printf(
      "scrape_ms_1024=%.2f scrape_ms_8=%.2f ratio=%.1f series_1024=%zu bytes_1024=%zu "
      "observe_ms_per_step_1024=%.2f target_ms=100\n",
      big.scrape_ms, small.scrape_ms, big.scrape_ms / small.scrape_ms, big.series, big.bytes,
      big.observe_ms);
  return big.scrape_ms <= 100 ? 0 : 1;
}
