// Pipeline schedules as data: for every pipeline rank, the ordered list of instructions it runs
// in one optimizer step. The same lists are executed by workers and timed by the simulator
// (simulator.h), which also proves them free of deadlocks.
//
// Model chunks: with pp ranks and vpp virtual stages per rank the model is cut into pp*vpp chunks
// of equal layer count; rank r holds global chunks r, r + pp, r + 2*pp, ... (Megatron's
// interleaving), so local chunk k of rank r is global chunk k*pp + r. Global chunk 0 holds the
// embedding, the last one the head and the loss.
//
// Every compute instruction is surrounded by its transfers: a forward of a chunk other than the
// first is preceded by kRecvAct and followed (unless it is the last chunk) by kSendAct to the
// owner of the next chunk; backwards mirror this with kRecvGrad / kSendGrad. Sends are
// asynchronous (the rank continues); receives block until the matching send has arrived.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace loom {

enum class InstrKind {
  kForward,
  kBackward,        // input and weight gradients together
  kBackwardInput,   // zero-bubble split: input gradient only (unblocks the previous stage)
  kBackwardWeight,  // zero-bubble split: weight gradient (fills bubbles)
  kSendAct,
  kRecvAct,
  kSendGrad,
  kRecvGrad,
  kOptimizerStep,
};
const char* InstrKindName(InstrKind kind);

struct Instr {
  InstrKind kind = InstrKind::kForward;
  int micro = -1;  // micro-batch
  int chunk = 0;   // local chunk on this rank (0 .. vpp-1)
  int peer = -1;   // pipeline rank of the other side of a transfer
  bool operator==(const Instr&) const = default;
};
std::string ToString(const Instr& i);

enum class ScheduleKind { kGPipe, k1F1B, kInterleaved, kZeroBubbleH1 };
Result<ScheduleKind> ParseScheduleKind(const std::string& name);  // gpipe|1f1b|interleaved|zb-h1
const char* ScheduleKindName(ScheduleKind kind);

struct Schedule {
  ScheduleKind kind = ScheduleKind::k1F1B;
  int pp = 1, vpp = 1, micro = 1;
  std::vector<std::vector<Instr>> ranks;  // ranks[r]: rank r's program

  int GlobalChunk(int rank, int local_chunk) const { return local_chunk * pp + rank; }
  int num_chunks() const { return pp * vpp; }
};

// Builds the schedule. GPipe, 1F1B and zero-bubble (ZB-H1) need vpp == 1; interleaved needs
// vpp >= 2 and micro % pp == 0 (as in Megatron); the error names the violated requirement.
Result<Schedule> MakeSchedule(ScheduleKind kind, int pp, int vpp, int micro);

}  // namespace loom
