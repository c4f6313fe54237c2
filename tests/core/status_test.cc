#include "core/status.h"

#include <gtest/gtest.h>

#include "core/logging.h"

namespace loom {
namespace {

Status Inner() {
  return InvalidArgument("job.yaml: field 'x': expected 1");
}
Status Outer() {
  LOOM_RETURN_IF_ERROR(Inner());
  return Status::Ok();
}
Result<int> Value(bool ok) {
  if (!ok) return NotFound("no value");
  return 7;
}
Status UseValue(bool ok, int* out) {
  LOOM_ASSIGN_OR_RETURN(int v, Value(ok));
  *out = v;
  return Status::Ok();
}

TEST(Status, PropagationAddsLocationOnce) {
  Status s = Outer();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("expected 1 [at tests/core/status_test.cc:"), std::string::npos)
      << s.message();
  EXPECT_EQ(s.message().find("[at", s.message().find("[at") + 1), std::string::npos);
}

// What people see (errors, warnings in the log) leaves the trail out unless DEBUG logging is on.
TEST(Status, ForUserDropsTheLocationUnlessDebugging) {
  const Status s = Outer();
  SetLogLevel(LogLevel::INFO);
  EXPECT_EQ(ForUser(s, LogSubsys::CKPT), "job.yaml: field 'x': expected 1");
  SetLogLevel(LogLevel::DEBUG);
  EXPECT_EQ(ForUser(s, LogSubsys::CKPT), s.message());
  SetLogLevel(LogLevel::INFO);
  EXPECT_EQ(ForUser(Inner(), LogSubsys::CLI), "job.yaml: field 'x': expected 1");
}

TEST(Status, ContextIsPrefixed) {
  Status s = NotFound("tensor 'wte'").WithContext("checkpoint 'x'");
  EXPECT_EQ(s.ToString(), "NotFound: checkpoint 'x': tensor 'wte'");
  EXPECT_TRUE(Status::Ok().WithContext("ignored").ok());
}

TEST(Result, ValueOrError) {
  int v = 0;
  EXPECT_TRUE(UseValue(true, &v).ok());
  EXPECT_EQ(v, 7);
  Status s = UseValue(false, &v);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  Result<int> bad(Status::Ok());  // misuse is turned into an error, not a crash
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace loom
