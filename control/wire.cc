// Length-prefixed Protobuf over TCP with deadlines.
#include "control/wire.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace loom {
namespace {

int RemainingMs(WireDeadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

// Waits until `fd` is ready for `events` or the deadline passes.
Status WaitReady(int fd, short events, WireDeadline deadline, const std::string& what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ms = RemainingMs(deadline);
    const int n = ::poll(&p, 1, ms);
    if (n > 0) return Status::Ok();
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(what, errno);
    return DeadlineExceeded(what + ": no progress before the deadline");
  }
}

Status WriteAll(int fd, const char* data, size_t n, WireDeadline deadline,
                const std::string& what) {
  while (n > 0) {
    LOOM_RETURN_IF_ERROR(WaitReady(fd, POLLOUT, deadline, what));
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w < 0) return ErrnoError(what, errno);
    data += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status ReadAll(int fd, char* data, size_t n, WireDeadline deadline, const std::string& what) {
  while (n > 0) {
    LOOM_RETURN_IF_ERROR(WaitReady(fd, POLLIN, deadline, what));
    const ssize_t r = ::recv(fd, data, n, MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r < 0) return ErrnoError(what, errno);
    if (r == 0) return IoError(what + ": connection closed by the peer");
    data += r;
    n -= static_cast<size_t>(r);
  }
  return Status::Ok();
}

}  // namespace

std::string FrameMessage(const proto::Envelope& msg) {
  const std::string body = msg.SerializeAsString();
  const uint32_t n = static_cast<uint32_t>(body.size());
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + body;
}

Result<uint32_t> FrameSize(const unsigned char header[4]) {
  const uint32_t n = static_cast<uint32_t>(header[0]) | static_cast<uint32_t>(header[1]) << 8 |
                     static_cast<uint32_t>(header[2]) << 16 |
                     static_cast<uint32_t>(header[3]) << 24;
  if (n > kMaxMessageBytes) {
    return InvalidArgument("message of " + std::to_string(n) + " bytes exceeds the limit of " +
                           std::to_string(kMaxMessageBytes));
  }
  return n;
}

Result<proto::Envelope> ParseMessage(const std::string& body, const std::string& from) {
  proto::Envelope msg;
  if (!msg.ParseFromString(body)) {
    return InvalidArgument(from + ": malformed message (" + std::to_string(body.size()) +
                           " bytes that are not a loom.proto.Envelope)");
  }
  if (msg.body_case() == proto::Envelope::BODY_NOT_SET) {
    return InvalidArgument(from + ": message without a body");
  }
  return msg;
}

Result<int> ConnectTcp(const std::string& endpoint, WireDeadline deadline) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == endpoint.size()) {
    return InvalidArgument("coordinator address '" + endpoint + "': expected host:port");
  }
  const std::string host = endpoint.substr(0, colon), port = endpoint.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    return InvalidArgument("coordinator address '" + endpoint + "': " + ::gai_strerror(rc));
  }
  Status last = IoError("connect to " + endpoint + ": no address");
  for (;;) {
    const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      last = ErrnoError("socket", errno);
      break;
    }
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0 || errno == EINPROGRESS) {
      Status ready = WaitReady(fd, POLLOUT, deadline, "connect to " + endpoint);
      int err = 0;
      socklen_t len = sizeof(err);
      if (ready.ok() && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
        const int one = 1;
        (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        ::freeaddrinfo(res);
        return fd;
      }
      last = ready.ok() ? ErrnoError("connect to " + endpoint, err) : ready;
    } else {
      last = ErrnoError("connect to " + endpoint, errno);
    }
    ::close(fd);
    // The coordinator may not be listening yet: retry until the deadline.
    if (RemainingMs(deadline) <= 0) break;
    ::poll(nullptr, 0, std::min(100, RemainingMs(deadline)));
  }
  ::freeaddrinfo(res);
  return last;
}

Status SendMessage(int fd, const proto::Envelope& msg, WireDeadline deadline,
                   const std::string& peer) {
  const std::string frame = FrameMessage(msg);
  return WriteAll(fd, frame.data(), frame.size(), deadline, "send to " + peer);
}

Result<proto::Envelope> RecvMessage(int fd, WireDeadline deadline, const std::string& peer) {
  unsigned char header[4];
  LOOM_RETURN_IF_ERROR(
      ReadAll(fd, reinterpret_cast<char*>(header), 4, deadline, "receive from " + peer));
  LOOM_ASSIGN_OR_RETURN(uint32_t n, FrameSize(header));
  std::string body(n, '\0');
  LOOM_RETURN_IF_ERROR(ReadAll(fd, body.data(), n, deadline, "receive from " + peer));
  return ParseMessage(body, peer);
}

}  // namespace loom
