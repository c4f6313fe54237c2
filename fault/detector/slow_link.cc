// Slow links and slow NICs: sends matched with their receives, per-byte transfer times per link
// against the median of the link's class (detector.h).
#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "fault/detector/detector.h"

namespace loom::detect {
namespace {

// A directed message stream: the k-th send matches the k-th receive.
using StreamKey = std::tuple<int, int, std::string, int>;  // src, dst, group, tag

}  // namespace

std::vector<Verdict> Detector::SlowLinks(const std::vector<RankStep>& step) {
  const int w = c_.world;
  std::map<StreamKey, std::vector<const CallEvidence*>> sends, recvs;
  int64_t at = 0;
  for (const RankStep& r : step) {
    at = std::max(at, r.step);
    for (const CallEvidence& c : r.calls) {
      if (c.peer < 0 || c.peer >= w) continue;
      if (c.op == "send") sends[{r.rank, c.peer, c.group, c.tag}].push_back(&c);
      if (c.op == "recv") recvs[{c.peer, r.rank, c.group, c.tag}].push_back(&c);
    }
  }
  // Per stream of one size on one link (sends of another kind, e.g. a once-a-step weight
  // exchange, are compared only with their like): the step's fastest transfer, s per byte.
  std::map<std::pair<int, int64_t>, double> fastest;  // (link, bytes) ->
  std::map<std::pair<int, int64_t>, int> count;
  auto by_seq = [](const CallEvidence* a, const CallEvidence* b) { return a->seq < b->seq; };
  for (auto& [key, s] : sends) {
    auto it = recvs.find(key);
    if (it == recvs.end()) continue;
    std::vector<const CallEvidence*>& rv = it->second;
    std::sort(s.begin(), s.end(), by_seq);
    std::sort(rv.begin(), rv.end(), by_seq);
    const int src = std::get<0>(key), dst = std::get<1>(key);
    for (size_t i = 0; i < std::min(s.size(), rv.size()); ++i) {
      const CallEvidence& a = *s[i];
      const CallEvidence& b = *rv[i];
      if (b.exit_ns == 0 || b.bytes < c_.min_link_bytes) continue;
      const double t = static_cast<double>(b.exit_ns - std::max(a.enter_ns, b.enter_ns));
      if (t <= 0) continue;
      const std::pair<int, int64_t> stream{src * w + dst, b.bytes};
      ++count[stream];
      auto f = fastest.find(stream);
      const double per_byte = t / static_cast<double>(b.bytes);
      if (f == fastest.end()) {
        fastest[stream] = per_byte;
      } else {
        f->second = std::min(f->second, per_byte);
      }
    }
  }
  // A message sent once a step (a weight exchange at the step's start) waits for its receiver
  // more than it travels: streams of at least two transfers a step only.
  for (auto it = fastest.begin(); it != fastest.end();) {
    it = count[it->first] < 2 ? fastest.erase(it) : std::next(it);
  }
  // Each stream's floor: the fastest of its last link_window steps (a link's own speed shows in
  // its fastest transfers; being descheduled only ever adds). Judged once its window is full,
  // against the median floor of the other links' streams of its size and class (inside a node,
  // between nodes), when at least two others can be compared; a link's factor is the median of
  // its streams'.
  std::map<std::pair<int, int64_t>, double> floor;
  for (const auto& [stream, t] : fastest) {
    std::vector<double>& h = stream_history_[stream];
    h.push_back(t);
    if (h.size() > static_cast<size_t>(c_.link_window)) h.erase(h.begin());
    if (h.size() == static_cast<size_t>(c_.link_window)) {
      floor[stream] = *std::min_element(h.begin(), h.end());
    }
  }
  auto inter = [&](int l) { return NodeOf(l / w) != NodeOf(l % w); };
  std::map<int, std::vector<double>> factors;  // by link
  for (const auto& [stream, t] : floor) {
    std::vector<double> others;
    for (const auto& [o, u] : floor) {
      if (o.first != stream.first && o.second == stream.second &&
          inter(o.first) == inter(stream.first)) {
        others.push_back(u);
      }
    }
    if (others.size() < 2) continue;
    const double m = MedianOf(others);
    factors[stream.first].push_back(m > 0 ? t / m : 1.0);
  }
  std::vector<int> observed;
  for (const auto& [l, fs] : factors) {
    observed.push_back(l);
    const double f = MedianOf(fs);
    link_factors_[l] = f;
    link_run_[l] = f >= c_.slow_link_factor ? link_run_[l] + 1 : 0;
    if (link_alarmed_[l] && f < c_.slow_link_release) link_alarmed_[l] = false;
  }
  std::vector<Verdict> out;
  auto slow = [&](int l) { return link_run_[l] >= c_.persist; };
  for (int l : observed) {
    if (!slow(l) || link_alarmed_[l]) continue;
    const int src = l / w, dst = l % w;
    // A node whose every observed link out (or in) is slow: its NIC, not one link.
    int node = -1;
    bool egress = false;
    if (inter(l)) {
      for (const bool out_side : {true, false}) {
        const int n = NodeOf(out_side ? src : dst);
        int seen = 0, bad = 0;
        for (int o : observed) {
          if (!inter(o) || NodeOf(out_side ? o / w : o % w) != n) continue;
          ++seen;
          bad += slow(o) ? 1 : 0;
        }
        if (seen >= 2 && bad == seen) {
          node = n;
          egress = out_side;
          break;
        }
      }
    }
    Verdict v;
    v.step = at;
    char buf[200];
    if (node >= 0) {
      v.kind = AnomalyKind::kSlowNode;
      v.node = node;
      double worst = 0;
      for (int o : observed) {
        if (inter(o) && NodeOf(egress ? o / w : o % w) == node) {
          link_alarmed_[o] = true;
          worst = std::max(worst, link_factors_[o]);
        }
      }
      v.score = worst;
      std::snprintf(buf, sizeof(buf),
                    " is slow: every link %s it transfers at up to %.2fx the time of the "
                    "others (%d steps in a row): its network interface",
                    egress ? "out of" : "into", worst, link_run_[l]);
      v.line = "node " + NodeName(node) + buf;
    } else {
      v.kind = AnomalyKind::kSlowLink;
      v.src = src;
      v.dst = dst;
      v.node = NodeOf(dst);
      v.score = link_factors_[l];
      link_alarmed_[l] = true;
      std::snprintf(buf, sizeof(buf),
                    " is slow: its transfers take %.2fx the time of the other %s links (%d "
                    "steps in a row); the ranks' other links are normal",
                    v.score, inter(l) ? "inter-node" : "intra-node", link_run_[l]);
      v.line = "the link from " + RankName(src) + " to " + RankName(dst) + buf;
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace loom::detect
