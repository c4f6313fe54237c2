// Tunables: LOOM_* environment variables that adjust how Loom runs (LOOM_THREADS, LOOM_*_MS,
// LOOM_CKPT_DIRECT_IO, LOOM_LOG_LEVEL, ...). Each is declared next to its use, with its default and
// accepted values, and registered there in one registry; every command checks the registry at its
// start (CheckTunables), so a value set to anything else (a typo, "5s", "-1", "yes") is refused by
// name before any work: a tunable silently read as 0 or as its default would turn a 10 s wait into
// none, or a deadline into the wrong one. Fault injection (LOOM_FAULT_*) has its own table
// (fault/inject.h).
//
// Declaring one, at namespace scope of the file that reads it:
//   const IntTunable kCommTimeoutTunable =
//       RegisterTunable({"LOOM_COMM_TIMEOUT_MS", 30000, 1, kMaxTunableMs, "a number of ms"});
// A tunable that is not a whole number (a switch, a list) registers its own check:
//   const bool kDirectIoChecked = RegisterTunableCheck("LOOM_CKPT_DIRECT_IO", &CheckDirectIo);
// The registry holds what the program links: a file's tunables are registered when the file is
// part of the binary, before main.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace loom {

// An integer tunable: `fallback` when unset or empty, else a whole number in [lo, hi].
struct IntTunable {
  const char* name;
  int64_t fallback, lo, hi;
  const char* meaning;  // for the error: "a number of ms", "threads per rank"
};

// At most 30 days: a deadline of now + more than ~292 years overflows the clock.
inline constexpr int64_t kMaxTunableMs = 30LL * 24 * 3600 * 1000;

// The value, or InvalidArgument: "environment variable LOOM_THREADS: expected threads per rank,
// a whole number from 1 to 4096, got '0'".
Result<int64_t> ReadTunable(const IntTunable& t);
// The value, or the fallback when it is invalid (for readers that cannot fail; the start-up check
// has refused an invalid value before they run).
int64_t TunableOr(const IntTunable& t);

// Adds `t` to the registry and returns it (for a namespace-scope declaration).
IntTunable RegisterTunable(const IntTunable& t);
// Adds a tunable whose value `check` validates (Ok when unset) to the registry; returns true.
bool RegisterTunableCheck(const char* name, Status (*check)());

// Every registered tunable, in name order: the first one set to an invalid value.
Status CheckTunables();

}  // namespace loom
