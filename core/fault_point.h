// Fault-injection points: named places in the code where a test can make something go wrong
// (this process killed, stopped, slowed down, interrupted). A point is declared where it is, in
// any layer; what happens there is decided by fault/inject.h's one validated table of LOOM_FAULT_*
// variables, which the binary installs at start-up. Without one installed a point costs one
// relaxed atomic load.
#pragma once

#include <atomic>
#include <cstdint>

namespace loom {

enum class FaultSite {
  kBeforeStep,            // the trainer, before optimizer step `step` (1-based) runs
  kCheckpointCrashPoint,  // saving a checkpoint: a place a crash must leave nothing loadable
  kCheckpointRestore,     // a rank is about to look for a checkpoint to resume
  kInterruptCheck,        // a tool that writes files checks for Ctrl-C between units of work
  kSnapshotCopy,          // a snapshot of `step` is being copied into shared memory
  kSnapshotEncode,        // ... its row is about to be erasure-coded
  kSnapshotTransfer,      // ... its fragments are about to be sent (`where`: which round)
  kSnapshotCommitted,     // ... every rank replicated it; this rank marks it committed
  kSnapshotRestore,       // a restarted rank is about to take stock of the snapshots it finds
  // Communication (comm/): on the caller's thread before a call is issued; on the backend's
  // when it starts (its start time taken, before the data moves: `where` the op, `peer` and
  // `bytes`, `data` the call) and when it ends (`data` the call); on the caller's when a wait
  // returns.
  kCommIssue,
  kCommStart,
  kCommEnd,
  kCommWaited,
};

struct FaultContext {
  FaultSite site;
  int rank = -1;           // world rank (-1: not known here)
  int64_t step = 0;        // kBeforeStep: the step about to run; kSnapshot*: the snapshot's
  const char* where = "";  // kCheckpointCrashPoint: which crash point ("before the rename")
  void* data = nullptr;    // kSnapshotRestore: the rank's view of its node's snapshots
  int peer = -1;           // kCommStart: the world rank of a send's or receive's peer
  int64_t bytes = 0;       // kCommStart: the call's bytes
};

using FaultHandler = void (*)(const FaultContext& ctx);

namespace internal {
inline std::atomic<FaultHandler> g_fault_handler{nullptr};
}  // namespace internal

// Installs the handler every point calls (nullptr: none). Call before starting threads.
inline void SetFaultHandler(FaultHandler handler) {
  internal::g_fault_handler.store(handler, std::memory_order_release);
}

// A fault-injection point: calls the installed handler, if any, with `ctx`.
inline void FaultPoint(const FaultContext& ctx) {
  if (FaultHandler h = internal::g_fault_handler.load(std::memory_order_acquire)) h(ctx);
}

}  // namespace loom
