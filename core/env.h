// Tunables read from the environment (LOOM_THREADS, LOOM_*_MS, LOOM_CKPT_DIRECT_IO,
// LOOM_LOG_LEVEL). Each has one entry here with its default and accepted range, so a reader and
// the start-up check cannot disagree. A value set to anything else (a typo, "5s", "-1", "yes") is
// refused by name at the start of every command: a tunable silently read as 0 or as its default
// would turn a 10 s wait into none, or a deadline into the wrong one.
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

inline constexpr IntTunable kThreadsTunable{"LOOM_THREADS", 0, 1, 4096, "threads per rank"};
inline constexpr IntTunable kCommTimeoutTunable{"LOOM_COMM_TIMEOUT_MS", 30000, 1, kMaxTunableMs,
                                                "a number of ms"};
inline constexpr IntTunable kCkptTimeoutTunable{"LOOM_CKPT_TIMEOUT_MS", 600000, 1, kMaxTunableMs,
                                                "a number of ms"};
inline constexpr IntTunable kCkptLockWaitTunable{"LOOM_CKPT_LOCK_WAIT_MS", 10000, 0, kMaxTunableMs,
                                                 "a number of ms"};
inline constexpr IntTunable kAbortGraceTunable{"LOOM_ABORT_GRACE_MS", 5000, 0, kMaxTunableMs,
                                               "a number of ms"};

// The value, or InvalidArgument: "environment variable LOOM_THREADS: expected threads per rank,
// a whole number from 1 to 4096, got '0'".
Result<int64_t> ReadTunable(const IntTunable& t);
// The value, or the fallback when it is invalid (for readers that cannot fail; the start-up check
// has refused an invalid value before they run).
int64_t TunableOr(const IntTunable& t);
// Every tunable above, LOOM_CKPT_DIRECT_IO (0 or 1), LOOM_LOG_SUBSYS (a comma-separated list of
// subsystems) and LOOM_LOG_LEVEL (DEBUG, INFO, WARN or ERROR): the first one set to something
// else.
Status CheckTunables();

}  // namespace loom
