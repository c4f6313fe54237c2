// A small HTTP/1.1 server (Boost.Beast, one I/O thread) for the coordinator's /metrics and
// status page: GET and HEAD only, one request per connection, every read and write under a
// deadline (a client that stalls is dropped, it never blocks the others for longer).
//
// Thread-safety: Start/Stop from any thread; the handler runs on the server's thread, one
// request at a time, and must be thread-safe against the caller's other threads.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"

namespace loom {

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// `target` is the request's path and query ("/metrics", "/api/run.json?steps=100").
using HttpHandler = std::function<HttpReply(const std::string& target)>;

class HttpServer {
 public:
  // Listens on `address`:`port` (0: any free port) before returning.
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& address, int port,
                                                   HttpHandler handler);
  ~HttpServer();  // Stop()
  void Stop();

  int port() const { return port_; }
  // "http://ADDRESS:PORT" (a wildcard address shown as this host's name).
  std::string url() const;

  struct Impl;

 private:
  HttpServer() = default;
  std::unique_ptr<Impl> impl_;
  std::string address_;
  int port_ = 0;
};

}  // namespace loom
