// Generators for GPipe, 1F1B, interleaved 1F1B and ZB-H1.
#include "parallel/pipeline/schedule.h"

#include <algorithm>

namespace loom {
namespace {

// A compute unit before transfers are inserted: forward/backward of (micro, local chunk).
struct Unit {
  InstrKind kind;
  int micro, chunk;
};

// Appends `u` with the transfers around it (see the header).
void Emit(const Schedule& s, int rank, const Unit& u, std::vector<Instr>* out) {
  const int g = s.GlobalChunk(rank, u.chunk), last = s.num_chunks() - 1;
  const int prev_rank = (rank + s.pp - 1) % s.pp, next_rank = (rank + 1) % s.pp;
  switch (u.kind) {
    case InstrKind::kForward:
      if (g > 0) out->push_back({InstrKind::kRecvAct, u.micro, u.chunk, prev_rank});
      out->push_back({InstrKind::kForward, u.micro, u.chunk, -1});
      if (g < last) out->push_back({InstrKind::kSendAct, u.micro, u.chunk, next_rank});
      break;
    case InstrKind::kBackward:
    case InstrKind::kBackwardInput:
      if (g < last) out->push_back({InstrKind::kRecvGrad, u.micro, u.chunk, next_rank});
      out->push_back({u.kind, u.micro, u.chunk, -1});
      if (g > 0) out->push_back({InstrKind::kSendGrad, u.micro, u.chunk, prev_rank});
      break;
    default:
      out->push_back({u.kind, u.micro, u.chunk, -1});
  }
}

// Forward/backward unit order of rank r for 1F1B-style schedules: `warmup` forwards, then
// alternate one forward and one backward, then the remaining backwards.
std::vector<Unit> OneFOneB(const std::vector<Unit>& fwd, const std::vector<Unit>& bwd, int warmup) {
  std::vector<Unit> out;
  size_t f = 0, b = 0;
  for (; f < static_cast<size_t>(warmup) && f < fwd.size(); ++f) out.push_back(fwd[f]);
  while (f < fwd.size()) {
    out.push_back(fwd[f++]);
    out.push_back(bwd[b++]);
  }
  while (b < bwd.size()) out.push_back(bwd[b++]);
  return out;
}

}  // namespace

const char* InstrKindName(InstrKind kind) {
  switch (kind) {
    case InstrKind::kForward:
      return "F";
    case InstrKind::kBackward:
      return "B";
    case InstrKind::kBackwardInput:
      return "BI";
    case InstrKind::kBackwardWeight:
      return "W";
    case InstrKind::kSendAct:
      return "send_act";
    case InstrKind::kRecvAct:
      return "recv_act";
    case InstrKind::kSendGrad:
      return "send_grad";
    case InstrKind::kRecvGrad:
      return "recv_grad";
    case InstrKind::kOptimizerStep:
      return "optimizer_step";
  }
  return "?";
}

std::string ToString(const Instr& i) {
  std::string s = InstrKindName(i.kind);
  if (i.micro >= 0) s += "(mb " + std::to_string(i.micro) + ", chunk " + std::to_string(i.chunk);
  if (i.peer >= 0) s += ", peer " + std::to_string(i.peer);
  if (i.micro >= 0) s += ")";
  return s;
}

const char* ScheduleKindName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe:
      return "gpipe";
    case ScheduleKind::k1F1B:
      return "1f1b";
    case ScheduleKind::kInterleaved:
      return "interleaved";
    case ScheduleKind::kZeroBubbleH1:
      return "zb-h1";
  }
  return "?";
}

Result<ScheduleKind> ParseScheduleKind(const std::string& name) {
  for (ScheduleKind k : {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::kInterleaved,
                         ScheduleKind::kZeroBubbleH1}) {
    if (name == ScheduleKindName(k)) return k;
  }
  return InvalidArgument("unknown schedule '" + name +
                         "' (expected gpipe, 1f1b, interleaved or zb-h1)");
}

Result<Schedule> MakeSchedule(ScheduleKind kind, int pp, int vpp, int micro) {
  if (pp < 1 || vpp < 1 || micro < 1)
    return InvalidArgument("schedule: pp, vpp and micro-batches must be >= 1");
  if (kind != ScheduleKind::kInterleaved && vpp != 1) {
    return InvalidArgument(std::string("schedule ") + ScheduleKindName(kind) +
                           " has one chunk per rank: vpp must be 1 (got " + std::to_string(vpp) +
                           "); use 'interleaved' for virtual stages");
  }
  if (kind == ScheduleKind::kInterleaved) {
    if (vpp < 2)
      return InvalidArgument("schedule interleaved needs vpp >= 2 (got " + std::to_string(vpp) +
                             ")");
    if (micro % pp != 0) {
      return InvalidArgument("schedule interleaved needs the number of micro-batches (" +
                             std::to_string(micro) + ") to be a multiple of pp (" +
                             std::to_string(pp) + "), as in Megatron");
    }
  }
  Schedule s{kind, pp, vpp, micro, std::vector<std::vector<Instr>>(static_cast<size_t>(pp))};
  for (int r = 0; r < pp; ++r) {
    std::vector<Unit> fwd, bwd, order;
    if (kind == ScheduleKind::kInterleaved) {
      // Units go round the chunks in groups of pp micro-batches (Megatron's order).
      for (int i = 0; i < micro * vpp; ++i) {
        const int group = i / (pp * vpp), in_group = i % (pp * vpp);
        const int mb = group * pp + in_group % pp;
        fwd.push_back({InstrKind::kForward, mb, in_group / pp});
        bwd.push_back({InstrKind::kBackward, mb, vpp - 1 - in_group / pp});
      }
      const int warmup = std::min(micro * vpp, (pp - r - 1) * 2 + (vpp - 1) * pp);
      order = OneFOneB(fwd, bwd, warmup);
    } else {
      const InstrKind b =
          kind == ScheduleKind::kZeroBubbleH1 ? InstrKind::kBackwardInput : InstrKind::kBackward;
      for (int mb = 0; mb < micro; ++mb) {
        fwd.push_back({InstrKind::kForward, mb, 0});
        bwd.push_back({b, mb, 0});
      }
      if (kind == ScheduleKind::kGPipe) {
        order = fwd;
        order.insert(order.end(), bwd.begin(), bwd.end());
      } else {
        order = OneFOneB(fwd, bwd, std::min(micro, pp - r - 1));
      }
      if (kind == ScheduleKind::kZeroBubbleH1) {
        // ZB-H1: the weight-gradient pass W runs right after its input-gradient pass during
        // warm-up and steady state; in the cool-down each W is deferred by one slot, so it runs
        // while the rank would otherwise wait for the next gradient. Since input gradients are
        // cheaper than whole backwards, gradients also travel upstream faster. In-flight
        // activations stay those of 1F1B (no forward happens in the cool-down).
        std::vector<Unit> with_w;
        int forwards_left = micro, pending_w = -1;
        for (const Unit& u : order) {
          with_w.push_back(u);
          if (u.kind == InstrKind::kForward) --forwards_left;
          if (u.kind != InstrKind::kBackwardInput) continue;
          if (forwards_left > 0) {
            with_w.push_back({InstrKind::kBackwardWeight, u.micro, 0});
          } else {
            if (pending_w >= 0) with_w.push_back({InstrKind::kBackwardWeight, pending_w, 0});
            pending_w = u.micro;
          }
        }
        if (pending_w >= 0) with_w.push_back({InstrKind::kBackwardWeight, pending_w, 0});
        order = with_w;
      }
    }
    for (const Unit& u : order) Emit(s, r, u, &s.ranks[static_cast<size_t>(r)]);
    s.ranks[static_cast<size_t>(r)].push_back({InstrKind::kOptimizerStep, -1, 0, -1});
  }
  return s;
}

}  // namespace loom
