// Two small collectives over a communicator, for protocols that agree before they act: every
// member's blob of bytes (of any lengths), and one status agreed by all (an error on every member
// when any member failed, naming the first). Blocking, collective over the communicator's
// members, with the deadline given (a protocol whose members arrive after local work of very
// different lengths passes a long one). Buffers are kept when the wait is abandoned
// (communicator.h).
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"

namespace loom {

// Every member's `mine`, by group rank (null communicator: just `mine`).
Result<std::vector<std::string>> AllGatherBlobs(Communicator* comm, const std::string& mine,
                                                Deadline deadline);

// `local` on the member that failed; on the others, when any member failed, `code` with
// "<what> failed on rank R (see its error)", R the lowest failing member's world rank.
Status AgreeStatus(Communicator* comm, const Status& local, const std::string& what,
                   Deadline deadline, StatusCode code = StatusCode::kFailedPrecondition);

}  // namespace loom
