// Routing of the status page's requests.
#include "coordinator/metrics/status_routes.h"

#include <prometheus/collectable.h>
#include <prometheus/text_serializer.h>

#include <charconv>

namespace loom {
namespace {

constexpr size_t kPageSteps = 2000;  // steps built into the page and sent by default

// The value of `key` in the query of `target` ("" when absent).
std::string QueryValue(const std::string& target, const std::string& key) {
  const size_t q = target.find('?');
  if (q == std::string::npos) return "";
  size_t pos = q + 1;
  while (pos < target.size()) {
    const size_t amp = std::min(target.find('&', pos), target.size());
    const std::string pair = target.substr(pos, amp - pos);
    if (pair.rfind(key + "=", 0) == 0) return pair.substr(key.size() + 1);
    pos = amp + 1;
  }
  return "";
}

// "</script>" inside the built-in JSON would end the page's script early.
std::string ForScript(std::string json) {
  for (size_t p = json.find("</"); p != std::string::npos; p = json.find("</", p + 2)) {
    json.replace(p, 2, "<\\/");
  }
  return json;
}

}  // namespace

HttpReply ServeStatus(const StatusSource& source, const std::string& target) {
  const std::string path = target.substr(0, target.find('?'));
  HttpReply r;
  if (path == "/" || path == "/index.html") {
    std::string page(StatusPageHtml());
    const std::string marker = "/*LOOM_RUN*/null";
    const size_t at = page.find(marker);
    if (at != std::string::npos)
      page.replace(at, marker.size(), ForScript(source.view(kPageSteps)));
    r.content_type = "text/html; charset=utf-8";
    r.body = std::move(page);
  } else if (path == "/api/run.json") {
    size_t steps = kPageSteps;
    const std::string v = QueryValue(target, "steps");
    if (!v.empty()) {
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), steps);
      if (ec != std::errc() || end != v.data() + v.size()) {
        return {400, "text/plain; charset=utf-8", "steps: expected a count of steps\n"};
      }
    }
    r.content_type = "application/json";
    r.body = source.view(steps);
  } else if (path == "/chart.js") {
    r.content_type = "text/javascript; charset=utf-8";
    r.body = std::string(ChartJs());
  } else if (path == "/metrics" && source.metrics != nullptr) {
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = prometheus::TextSerializer().Serialize(source.metrics->Collect());
  } else {
    r.status = 404;
    r.body = "not found: " + path + " (try /, /metrics, /api/run.json)\n";
  }
  return r;
}

}  // namespace loom
