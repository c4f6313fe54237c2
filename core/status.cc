// Status formatting and context helpers.
#include "core/status.h"

#include <cstring>
#include <string>

namespace loom {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kIoError:
      return "IoError";
    case StatusCode::kDataLoss:
      return "DataLoss";
    case StatusCode::kDeadlineExceeded:
      return "DeadlineExceeded";
    case StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
    case StatusCode::kUnimplemented:
      return "Unimplemented";
    case StatusCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

Status Status::WithLocation(const char* file, int line) const {
  if (ok()) return *this;
  // Only the innermost location is kept: it names where the error was first seen and keeps
  // user-facing messages short.
  if (message_.find(" [at ") != std::string::npos) return *this;
  return Status(code_, message_ + " [at " + file + ":" + std::to_string(line) + "]");
}

Status ErrnoError(std::string_view what, int err) {
  return IoError(std::string(what) + ": " + std::strerror(err));
}

}  // namespace loom
