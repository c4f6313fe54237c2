// What the coordinator serves over HTTP beside /metrics, as pure routing (no sockets):
//   /                the status page (the run's records built in, so it draws at once)
//   /api/run.json    the run's records (run_record.h HistoryJson); ?steps=N: the newest N steps
//   /chart.js        Chart.js, built into the binary from Debian's libjs-chart.js
//   /metrics         the job's metrics in Prometheus' text format (when a job is running)
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "coordinator/metrics/http_server.h"

namespace prometheus {
class Collectable;
}

namespace loom {

struct StatusSource {
  // The run's document with at most `max_steps` of the newest steps (0: all).
  std::function<std::string(size_t max_steps)> view;
  const prometheus::Collectable* metrics = nullptr;  // null: no /metrics (a finished run)
};

HttpReply ServeStatus(const StatusSource& source, const std::string& target);

// The assets built into the binary (cmake/EmbedAsset.cmake).
std::string_view StatusPageHtml();
std::string_view ChartJs();

}  // namespace loom
