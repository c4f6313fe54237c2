// Framing of control messages: sizes, limits, malformed bodies, invalid UTF-8 in a string.
#include "control/wire.h"

#include <gtest/gtest.h>

#include "core/utf8.h"

namespace loom {
namespace {

TEST(Wire, FrameRoundTrip) {
  proto::Envelope msg;
  msg.set_job_token("abc");
  msg.mutable_heartbeat()->set_rank(3);
  msg.mutable_heartbeat()->set_step(17);
  const std::string frame = FrameMessage(msg);
  auto n = FrameSize(reinterpret_cast<const unsigned char*>(frame.data()));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n + 4, frame.size());
  auto back = ParseMessage(frame.substr(4), "test");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->job_token(), "abc");
  EXPECT_EQ(back->heartbeat().step(), 17);
}

// Done.sample is a proto3 string: a byte-level model's raw bytes (here € cut short) would make the
// coordinator refuse the whole Done, so the worker sends them through PrintableUtf8.
TEST(Wire, SampleMustBeValidUtf8) {
  proto::Envelope msg;
  msg.mutable_done()->set_ok(true);
  const std::string raw = "ab\x80\xe2\x82";
  msg.mutable_done()->set_sample(raw);
  EXPECT_FALSE(ParseMessage(FrameMessage(msg).substr(4), "test").ok());
  msg.mutable_done()->set_sample(PrintableUtf8(raw));
  auto back = ParseMessage(FrameMessage(msg).substr(4), "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->done().sample(), "ab\\x80\\xe2\\x82");
}

TEST(Wire, OversizedAndMalformedAreRefused) {
  const unsigned char big[4] = {0, 0, 0, 2};  // 32 MiB
  auto n = FrameSize(big);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("exceeds the limit"), std::string::npos);
  auto bad = ParseMessage("\xff\xff\xff", "peer 1.2.3.4:5");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("peer 1.2.3.4:5: malformed message"), std::string::npos);
  proto::Envelope empty;
  empty.set_job_token("abc");
  bad = ParseMessage(empty.SerializeAsString(), "p");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("without a body"), std::string::npos);
}

TEST(Wire, ConnectRefusesBadAddresses) {
  auto r = ConnectTcp("nohost", std::chrono::steady_clock::now());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("expected host:port"), std::string::npos);
}

}  // namespace
}  // namespace loom
