// The HTTP server on real sockets: GET and HEAD answered, other methods refused, a client that
// stalls mid-request does not hold up the next one.
#include "coordinator/metrics/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio.hpp>
#include <string>

namespace loom {
namespace {

using boost::asio::ip::tcp;

// Sends `request` to 127.0.0.1:`port` and returns everything the server sent back.
std::string Exchange(int port, const std::string& request) {
  boost::asio::io_context io;
  tcp::socket s(io);
  s.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  boost::asio::write(s, boost::asio::buffer(request));
  std::string out;
  boost::system::error_code ec;
  char buf[4096];
  for (;;) {
    const size_t n = s.read_some(boost::asio::buffer(buf), ec);
    out.append(buf, n);
    if (ec) break;
  }
  return out;
}

TEST(HttpServer, AnswersGetAndHead) {
  std::atomic<int> calls{0};
  Result<std::unique_ptr<HttpServer>> s =
      HttpServer::Start("127.0.0.1", 0, [&](const std::string& target) {
        ++calls;
        return HttpReply{200, "text/plain", "you asked for " + target};
      });
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const int port = (*s)->port();
  ASSERT_GT(port, 0);
  EXPECT_EQ((*s)->url(), "http://127.0.0.1:" + std::to_string(port));
  std::string r = Exchange(port, "GET /a?b=1 HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  EXPECT_NE(r.find("you asked for /a?b=1"), std::string::npos) << r;
  r = Exchange(port, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  EXPECT_EQ(r.find("you asked"), std::string::npos) << r;
  r = Exchange(port, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 405", 0), 0u) << r;
  EXPECT_EQ(calls.load(), 2);
}

TEST(HttpServer, AStalledClientDoesNotBlockOthers) {
  Result<std::unique_ptr<HttpServer>> s = HttpServer::Start("127.0.0.1", 0, [](const std::string&) {
    return HttpReply{200, "text/plain", "ok"};
  });
  ASSERT_TRUE(s.ok());
  boost::asio::io_context io;
  tcp::socket stalled(io);
  stalled.connect(
      {boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>((*s)->port())});
  boost::asio::write(stalled, boost::asio::buffer(std::string("GET / HTTP/1.1\r\nHo")));
  const std::string r = Exchange((*s)->port(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
}

TEST(HttpServer, BadAddressOrBusyPortIsNamed) {
  auto handler = [](const std::string&) { return HttpReply{}; };
  Result<std::unique_ptr<HttpServer>> bad = HttpServer::Start("not-an-ip", 0, handler);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'not-an-ip'"), std::string::npos);
  Result<std::unique_ptr<HttpServer>> first = HttpServer::Start("127.0.0.1", 0, handler);
  ASSERT_TRUE(first.ok());
  Result<std::unique_ptr<HttpServer>> second =
      HttpServer::Start("127.0.0.1", (*first)->port(), handler);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(std::to_string((*first)->port())), std::string::npos)
      << second.status().message();
}

}  // namespace
}  // namespace loom
