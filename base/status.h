// Status and Result<T>: how errors cross module boundaries in tunepar.
//
// A Status carries a code (which decides the process exit code in the CLI) and one line of
// text that names what was wrong and with which input. Functions that can fail return
// Status or Result<T>; callers return early on failure. Exceptions never cross modules.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tunepar {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // a flag or value the user gave is wrong
  kConfig,           // a config file is malformed or fails validation
  kNoLegalLayout,    // the constraints leave no layout for this world size
  kStore,            // the store cannot be opened, written or read
  kSchemaTooNew,     // a shard was written by a newer tunepar
  kNotFound,         // a named study, trial or preset does not exist
  kTrialsFailed,     // every trial failed the same way: the command or its setup is wrong
  kDamaged,          // a damaged shard was skipped: the result leaves out its trials
  kInterrupted,      // stopped by SIGINT or SIGTERM (cleanly)
  kFitFailed,        // a calibration did not fit: a parameter at a non-physical bound, or a large error
  kInternal,         // a bug: an invariant did not hold
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with context, e.g. the file a config came from.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status ConfigError(std::string m) {
  return {StatusCode::kConfig, std::move(m)};
}
inline Status StoreError(std::string m) {
  return {StatusCode::kStore, std::move(m)};
}
inline Status NotFound(std::string m) {
  return {StatusCode::kNotFound, std::move(m)};
}
inline Status InternalError(std::string m) {
  return {StatusCode::kInternal, std::move(m)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit on purpose
  // (Initialised in one expression: nvcc warns that an assignment's result, a [[nodiscard]]
  // Status&, is discarded.)
  Result(Status status)  // NOLINT: implicit on purpose
      : status_(status.ok() ? InternalError("Result constructed from an ok Status") : std::move(status)) {}

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace tunepar

// Returns the Status of `expr` from the enclosing function when it is not ok.
#define TUNEPAR_RETURN_IF_ERROR(expr)                                        \
  do {                                                                       \
    if (::tunepar::Status tunepar_status_ = (expr); !tunepar_status_.ok()) { \
      return tunepar_status_;                                                \
    }                                                                        \
  } while (0)
