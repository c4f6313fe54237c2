// How control messages travel (docs/COORDINATOR.md): each Envelope is preceded by its size as a
// 4-byte little-endian integer. A size above kMaxMessageBytes, a body that does not parse, or a
// connection that stalls past its deadline ends the connection; nothing else is trusted.
//
// The blocking helpers below work on a connected POSIX socket and wait with poll(), so every
// read and write has a deadline; they are used by workers (the coordinator uses Boost.Asio).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "proto/control.pb.h"

namespace loom {

constexpr uint32_t kMaxMessageBytes = 16u << 20;

// The frame of `msg`: 4 size bytes then the serialised message.
std::string FrameMessage(const proto::Envelope& msg);
// The body size from a frame's first 4 bytes; InvalidArgument when it exceeds the maximum.
Result<uint32_t> FrameSize(const unsigned char header[4]);
// Parses a body; InvalidArgument naming `from` when it is not an Envelope or has no body.
Result<proto::Envelope> ParseMessage(const std::string& body, const std::string& from);

using WireDeadline = std::chrono::steady_clock::time_point;

// Connects to "host:port" (IPv4 or a resolvable name) before `deadline`.
Result<int> ConnectTcp(const std::string& endpoint, WireDeadline deadline);
Status SendMessage(int fd, const proto::Envelope& msg, WireDeadline deadline,
                   const std::string& peer);
Result<proto::Envelope> RecvMessage(int fd, WireDeadline deadline, const std::string& peer);

}  // namespace loom
