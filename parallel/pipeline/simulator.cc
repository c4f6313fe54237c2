// Discrete-event simulation of pipeline programs.
#include "parallel/pipeline/simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace loom {
namespace {

// A message is identified by (is_grad, micro, destination global chunk, src rank, dst rank).
using MsgKey = std::tuple<bool, int, int, int, int>;

double ComputeCost(const Instr& i, int global_chunk, const PipelineCosts& c) {
  const double scale =
      c.chunk_scale.empty() ? 1.0 : c.chunk_scale[static_cast<size_t>(global_chunk)];
  switch (i.kind) {
    case InstrKind::kForward:
      return scale * c.forward;
    case InstrKind::kBackward:
      return scale * c.backward;
    case InstrKind::kBackwardInput:
      return scale * c.backward_input;
    case InstrKind::kBackwardWeight:
      return scale * c.backward_weight;
    case InstrKind::kOptimizerStep:
      return c.optimizer;
    default:
      return 0;
  }
}

bool IsCompute(InstrKind k) {
  return k == InstrKind::kForward || k == InstrKind::kBackward || k == InstrKind::kBackwardInput ||
         k == InstrKind::kBackwardWeight || k == InstrKind::kOptimizerStep;
}

}  // namespace

double SimResult::max_bubble() const {
  return bubble.empty() ? 0 : *std::max_element(bubble.begin(), bubble.end());
}

Result<SimResult> Simulate(const Schedule& s, const PipelineCosts& c) {
  const int p = s.pp;
  if (!c.chunk_scale.empty() && c.chunk_scale.size() != static_cast<size_t>(s.num_chunks())) {
    return InvalidArgument("pipeline costs: chunk_scale has " +
                           std::to_string(c.chunk_scale.size()) + " entries for " +
                           std::to_string(s.num_chunks()) + " chunks");
  }
  const double transfer = c.p2p_latency + (c.p2p_bandwidth > 0 ? c.p2p_bytes / c.p2p_bandwidth : 0);
  std::vector<size_t> pc(static_cast<size_t>(p), 0);
  std::vector<double> clock(static_cast<size_t>(p), 0);
  std::vector<int> held(static_cast<size_t>(p), 0);
  std::map<MsgKey, double> arrivals;  // sent, not yet received: arrival time
  SimResult out;
  out.busy.assign(static_cast<size_t>(p), 0);
  out.peak_in_flight.assign(static_cast<size_t>(p), 0);
  out.timeline.resize(static_cast<size_t>(p));
  // Message key of a transfer instruction on `rank`, as both ends name it.
  auto key = [&](int rank, const Instr& i) -> MsgKey {
    const int g = s.GlobalChunk(rank, i.chunk);
    switch (i.kind) {
      case InstrKind::kSendAct:
        return {false, i.micro, g + 1, rank, i.peer};
      case InstrKind::kRecvAct:
        return {false, i.micro, g, i.peer, rank};
      case InstrKind::kSendGrad:
        return {true, i.micro, g - 1, rank, i.peer};
      default:
        return {true, i.micro, g, i.peer, rank};  // kRecvGrad
    }
  };
  for (;;) {
    bool progressed = false, done = true;
    for (int r = 0; r < p; ++r) {
      auto& prog = s.ranks[static_cast<size_t>(r)];
      while (pc[r] < prog.size()) {
        const Instr& i = prog[pc[r]];
        if (i.kind == InstrKind::kRecvAct || i.kind == InstrKind::kRecvGrad) {
          auto it = arrivals.find(key(r, i));
          if (it == arrivals.end()) break;  // not sent yet: try other ranks
          clock[r] = std::max(clock[r], it->second);
          arrivals.erase(it);
        } else if (i.kind == InstrKind::kSendAct || i.kind == InstrKind::kSendGrad) {
          if (!arrivals.emplace(key(r, i), clock[r] + transfer).second) {
            return InvalidArgument("pipeline schedule: rank " + std::to_string(r) + " sends " +
                                   ToString(i) + " twice");
          }
        } else if (IsCompute(i.kind)) {
          const double cost = ComputeCost(i, s.GlobalChunk(r, i.chunk), c);
          out.timeline[r].push_back({i, clock[r], clock[r] + cost});
          clock[r] += cost;
          out.busy[r] += cost;
          if (i.kind == InstrKind::kForward) {
            out.peak_in_flight[r] = std::max(out.peak_in_flight[r], ++held[r]);
          } else if (i.kind == InstrKind::kBackward || i.kind == InstrKind::kBackwardWeight) {
            --held[r];  // activations are freed once the weight gradient is done
          }
        }
        ++pc[r];
        progressed = true;
      }
      if (pc[r] < prog.size()) done = false;
    }
    if (done) break;
    if (!progressed) {
      std::string blocked;
      for (int r = 0; r < p; ++r) {
        if (pc[r] < s.ranks[r].size()) {
          blocked += (blocked.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
                     " waits at " + ToString(s.ranks[r][pc[r]]);
        }
      }
      return FailedPrecondition("pipeline schedule deadlocks: " + blocked);
    }
  }
  if (!arrivals.empty()) {
    auto [grad, mb, chunk, src, dst] = arrivals.begin()->first;
    return FailedPrecondition("pipeline schedule: rank " + std::to_string(src) + " sends " +
                              (grad ? "gradients" : "activations") + " of micro-batch " +
                              std::to_string(mb) + " to rank " + std::to_string(dst) +
                              " (global chunk " + std::to_string(chunk) +
                              ") that are never received");
  }
  for (int r = 0; r < p; ++r) {
    if (held[r] != 0) {
      return FailedPrecondition("pipeline schedule: rank " + std::to_string(r) + " ends with " +
                                std::to_string(held[r]) + " forwards without a backward");
    }
  }
  out.step_time = *std::max_element(clock.begin(), clock.end());
  for (int r = 0; r < p; ++r) {
    out.bubble.push_back(out.busy[r] > 0 ? (out.step_time - out.busy[r]) / out.busy[r] : 0);
  }
  return out;
}

std::string RenderTimeline(const Schedule& s, const SimResult& res, int width) {
  // Characters per unit of time: at least `width` in all, and enough that the shortest
  // instruction has room for its label ("F12.1" is 5 characters) and a separator.
  double min_cost = 0;
  for (const auto& row : res.timeline) {
    for (const TimedInstr& t : row) {
      const double d = t.end - t.start;
      if (d > 0 && (min_cost == 0 || d < min_cost)) min_cost = d;
    }
  }
  const int label_len = (s.micro > 10 ? 3 : 2) + (s.vpp > 1 ? 2 : 0);
  double scale = res.step_time > 0 ? width / res.step_time : 1;
  if (min_cost > 0) scale = std::max(scale, (label_len + 1) / min_cost);
  width = static_cast<int>(std::ceil(res.step_time * scale - 1e-9));
  std::string out;
  for (int r = 0; r < s.pp; ++r) {
    std::string row(static_cast<size_t>(width), ' ');
    for (const TimedInstr& t : res.timeline[r]) {
      const int a = static_cast<int>(std::floor(t.start * scale + 1e-9));
      const int b = std::max(a + 1, static_cast<int>(std::floor(t.end * scale + 1e-9)));
      char fill = '.';
      std::string label;
      switch (t.instr.kind) {
        case InstrKind::kForward:
          label = "F";
          fill = '-';
          break;
        case InstrKind::kBackward:
          label = "B";
          fill = '=';
          break;
        case InstrKind::kBackwardInput:
          label = "I";
          fill = '=';
          break;
        case InstrKind::kBackwardWeight:
          label = "W";
          fill = '~';
          break;
        default:
          label = "O";
          fill = '#';
          break;
      }
      if (t.instr.micro >= 0) label += std::to_string(t.instr.micro);
      if (s.vpp > 1) label += "." + std::to_string(t.instr.chunk);
      for (int x = a; x < b && x < width; ++x) {
        const int k = x - a;
        row[static_cast<size_t>(x)] =
            k < static_cast<int>(label.size()) && b - a > static_cast<int>(label.size())
                ? label[static_cast<size_t>(k)]
                : (k == 0 ? label[0] : fill);
      }
    }
    char head[64];
    std::snprintf(head, sizeof(head), "rank %2d |", r);
    char tail[96];
    std::snprintf(tail, sizeof(tail), "| bubble %5.1f%%  peak in flight %d", 100 * res.bubble[r],
                  res.peak_in_flight[r]);
    out += head + row + tail + "\n";
  }
  return out;
}

}  // namespace loom
