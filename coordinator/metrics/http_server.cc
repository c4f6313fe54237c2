// The HTTP server on Boost.Beast: asynchronous sessions on one io_context thread.
#include "coordinator/metrics/http_server.h"

#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <thread>

#include "core/threads.h"

namespace loom {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kRequestDeadline = std::chrono::seconds(10);
constexpr size_t kMaxRequestBytes = 64 * 1024;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpHandler* handler)
      : stream_(std::move(socket)), handler_(handler) {}

  void Run() {
    parser_.body_limit(kMaxRequestBytes);
    parser_.header_limit(kMaxRequestBytes);
    stream_.expires_after(kRequestDeadline);
    http::async_read(stream_, buffer_, parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (!ec) self->Answer();
                     });
  }

 private:
  void Answer() {
    const auto& req = parser_.get();
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(req.version());
    res->set(http::field::server, "loom");
    res->keep_alive(false);
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      res->result(http::status::method_not_allowed);
      res->set(http::field::allow, "GET, HEAD");
      res->set(http::field::content_type, "text/plain; charset=utf-8");
      res->body() = "only GET and HEAD\n";
    } else {
      HttpReply reply = (*handler_)(std::string(req.target()));
      res->result(static_cast<unsigned>(reply.status));
      res->set(http::field::content_type, reply.content_type);
      res->set(http::field::cache_control, "no-store");
      if (req.method() == http::verb::get) res->body() = std::move(reply.body);
    }
    res->prepare_payload();
    stream_.expires_after(kRequestDeadline);
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code, size_t) {
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request_parser<http::string_body> parser_;
  const HttpHandler* handler_;
};

}  // namespace

struct HttpServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  HttpHandler handler;
  std::thread thread;

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) std::make_shared<Session>(std::move(socket), &handler)->Run();
      Accept();
    });
  }
};

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address, int port,
                                                      HttpHandler handler) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->impl_ = std::make_unique<Impl>();
  Impl& impl = *s->impl_;
  impl.handler = std::move(handler);
  beast::error_code ec;
  const asio::ip::address addr = asio::ip::make_address(address, ec);
  if (ec) {
    return InvalidArgument("metrics address '" + address + "': expected an IP address (" +
                           ec.message() + ")");
  }
  const tcp::endpoint ep(addr, static_cast<unsigned short>(port));
  impl.acceptor.open(ep.protocol(), ec);
  if (!ec) impl.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl.acceptor.bind(ep, ec);
  if (!ec) impl.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return IoError("metrics: cannot listen on " + address + ":" + std::to_string(port) + ": " +
                   ec.message());
  }
  s->address_ = address;
  s->port_ = impl.acceptor.local_endpoint().port();
  impl.Accept();
  impl.thread = std::thread([&impl] {
    SetThreadName("loom-http");
    impl.io.run();
  });
  return s;
}

HttpServer::~HttpServer() {
  Stop();
}

void HttpServer::Stop() {
  if (!impl_) return;
  asio::post(impl_->io, [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->io.stop();
  });
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_.reset();
}

std::string HttpServer::url() const {
  std::string host = address_;
  if (host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    ::gethostname(name, sizeof(name) - 1);
    host = name;
  }
  return "http://" + host + ":" + std::to_string(port_);
}

}  // namespace loom
