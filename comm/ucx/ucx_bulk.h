// The UCX bulk transport (comm/bulk_transport.h): one UCP context and worker per rank, the
// windows mapped with ucp_mem_map and their remote keys exchanged over the group's
// communicator, a put + flush per fragment, then its note put into the peer's notice area (not
// flushed: the receiver is the one waiting for it); the receiver polls its notice area (each note
// carries its round and a CRC, so a note still being written never reads as complete). Built only
// where UCX is found.
#pragma once

#include <memory>
#include <vector>

#include "comm/bulk_transport.h"

namespace loom {

// Collective over `group`. An error (no usable UCX transport, a failed mapping) names what
// failed; the caller may fall back to the communicator.
Result<std::unique_ptr<BulkTransport>> CreateUcxBulk(Communicator* group,
                                                     const std::vector<BulkWindow>& windows);

}  // namespace loom
