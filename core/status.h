// Status and Result<T>: the one error type of Loom. Every fallible function returns one of these
// and callers must look at it ([[nodiscard]]). No exceptions cross module boundaries.
//
//   Result<Config> r = LoadConfig(path);
//   if (!r.ok()) return r.status();
//   LOOM_ASSIGN_OR_RETURN(Config cfg, LoadConfig(path));   // same, shorter
//   LOOM_RETURN_IF_ERROR(Save(cfg));                         // appends " [at file:line]"
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace loom {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // bad input: config, manifest, CLI flag, file content
  kNotFound,          // a file, tensor or key that should exist does not
  kIoError,           // the OS refused a read/write/open
  kDataLoss,          // checksum mismatch, truncated file
  kDeadlineExceeded,  // a wait ran past its deadline (hung peer)
  kFailedPrecondition,
  kUnimplemented,
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: job.yaml: field 'model.layers': expected a positive integer".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>" (outermost context first).
  Status WithContext(std::string_view context) const;
  // Appends " [at file:line]" so a propagated error leaves a trail (like NCCLCHECK).
  Status WithLocation(const char* file, int line) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) {
  return {StatusCode::kNotFound, std::move(m)};
}
inline Status IoError(std::string m) {
  return {StatusCode::kIoError, std::move(m)};
}
inline Status DataLoss(std::string m) {
  return {StatusCode::kDataLoss, std::move(m)};
}
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Unimplemented(std::string m) {
  return {StatusCode::kUnimplemented, std::move(m)};
}
inline Status Internal(std::string m) {
  return {StatusCode::kInternal, std::move(m)};
}
// An IoError carrying strerror(errno) and what was being done ("open 'x.bin'").
Status ErrnoError(std::string_view what, int err);

// Result<T> holds either a T or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {
    if (status_.ok()) status_ = Internal("Result constructed from an ok Status without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace loom

#define LOOM_CONCAT_INNER_(a, b) a##b
#define LOOM_CONCAT_(a, b) LOOM_CONCAT_INNER_(a, b)

// Returns early with the error (plus file:line) when `expr` is not ok.
#define LOOM_RETURN_IF_ERROR(expr)                          \
  do {                                                      \
    ::loom::Status loom_status_ = (expr);                   \
    if (!loom_status_.ok()) {                               \
      return loom_status_.WithLocation(__FILE__, __LINE__); \
    }                                                       \
  } while (0)

// Like LOOM_RETURN_IF_ERROR, prefixing the message with `context` (a std::string expression).
#define LOOM_RETURN_IF_ERROR_CTX(expr, context)                                  \
  do {                                                                           \
    ::loom::Status loom_status_ = (expr);                                        \
    if (!loom_status_.ok()) {                                                    \
      return loom_status_.WithContext(context).WithLocation(__FILE__, __LINE__); \
    }                                                                            \
  } while (0)

#define LOOM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)       \
  auto tmp = (expr);                                      \
  if (!tmp.ok()) {                                        \
    return tmp.status().WithLocation(__FILE__, __LINE__); \
  }                                                       \
  lhs = std::move(tmp).value()

// `LOOM_ASSIGN_OR_RETURN(T x, ResultExpr)`: declares x from the value or returns the error.
#define LOOM_ASSIGN_OR_RETURN(lhs, expr) \
  LOOM_ASSIGN_OR_RETURN_IMPL_(LOOM_CONCAT_(loom_result_, __LINE__), lhs, expr)
