// The SDK's own error values: Status and StatusOr<T>, shaped like Abseil's
// (the same codes, ok()/code()/message(), status()/value()/operator*), so
// plugin code reads as it did, but built on the C++ standard library alone.
// A binary plugin then needs no Abseil at run time: it ships as one .so for
// many Linux distributions, whose Abseil SONAMEs differ (plugins/README.md).
//
// Where a plugin (the in-tree ones) also uses Abseil, the two interconvert
// implicitly: a function returning sdk::Status may return an absl::Status,
// and the other way round; likewise StatusOr. Nothing here names Abseil:
// any type that looks like a status (ok(), code(), message(), and a
// constructor from its code and a message) converts.
#ifndef MIXRT_PLUGINS_SDK_STATUS_H_
#define MIXRT_PLUGINS_SDK_STATUS_H_

#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace mixrt::sdk {

// Abseil's (and gRPC's) canonical codes, with their numbers.
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

const char* StatusCodeName(StatusCode code);

class Status;
template <typename T>
class StatusOr;

namespace status_internal {

template <typename S>
using CodeOf = decltype(std::declval<const S&>().code());

// A status type of another library: ok(), code(), message(), and made from
// (its code, a message as a std::string: Abseil's own string_view need not
// be std::string_view).
template <typename S, typename = void>
struct IsForeignStatus : std::false_type {};
template <typename S>
struct IsForeignStatus<
    S, std::void_t<decltype(std::declval<const S&>().ok()), CodeOf<S>,
                   decltype(std::declval<const S&>().message())>>
    : std::bool_constant<
          !std::is_same_v<S, Status> &&
          std::is_constructible_v<S, CodeOf<S>, const std::string&>> {};

// A StatusOr of another library: status() is a foreign status, value().
template <typename R, typename = void>
struct IsForeignStatusOr : std::false_type {};
template <typename R>
struct IsForeignStatusOr<
    R, std::void_t<decltype(std::declval<const R&>().status()),
                   decltype(std::declval<const R&>().value())>>
    : std::bool_constant<IsForeignStatus<
          std::decay_t<decltype(std::declval<const R&>().status())>>::value> {};

template <typename R>
using StatusOfStatusOr =
    std::decay_t<decltype(std::declval<const R&>().status())>;
template <typename R>
using ValueOfStatusOr =
    std::decay_t<decltype(std::declval<const R&>().value())>;

}  // namespace status_internal

class Status {
 public:
  Status() = default;  // OK.
  Status(StatusCode code, std::string_view message)
      : code_(code),
        message_(code == StatusCode::kOk ? "" : std::string(message)) {}

  // From another library's status (absl::Status), code and message.
  template <
      typename S,
      std::enable_if_t<status_internal::IsForeignStatus<S>::value, int> = 0>
  Status(const S& other)  // NOLINT: implicit by design.
      : Status(
            static_cast<StatusCode>(static_cast<int>(other.code())),
            std::string_view(other.message().data(), other.message().size())) {}

  // To another library's status.
  template <
      typename S,
      std::enable_if_t<status_internal::IsForeignStatus<S>::value, int> = 0>
  operator S() const {  // NOLINT: implicit by design.
    if (ok()) return S();
    return S(static_cast<status_internal::CodeOf<S>>(static_cast<int>(code_)),
             message_);
  }

  // To another library's StatusOr (an error: a returned failure).
  template <typename R,
            std::enable_if_t<status_internal::IsForeignStatusOr<R>::value,
                             int> = 0>
  operator R() const {  // NOLINT: implicit by design.
    return R(static_cast<status_internal::StatusOfStatusOr<R>>(*this));
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  std::string_view message() const { return message_; }
  std::string ToString() const;

  // Named extra data, e.g. which step of a kernel graph failed.
  void SetPayload(const std::string& key, std::string value);
  std::optional<std::string> GetPayload(const std::string& key) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }
  friend bool operator!=(const Status& a, const Status& b) { return !(a == b); }
  friend std::ostream& operator<<(std::ostream& os, const Status& s) {
    return os << s.ToString();
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::shared_ptr<std::map<std::string, std::string>> payloads_;
};

inline Status OkStatus() { return Status(); }
inline Status CancelledError(std::string_view m) {
  return Status(StatusCode::kCancelled, m);
}
inline Status UnknownError(std::string_view m) {
  return Status(StatusCode::kUnknown, m);
}
inline Status InvalidArgumentError(std::string_view m) {
  return Status(StatusCode::kInvalidArgument, m);
}
inline Status DeadlineExceededError(std::string_view m) {
  return Status(StatusCode::kDeadlineExceeded, m);
}
inline Status NotFoundError(std::string_view m) {
  return Status(StatusCode::kNotFound, m);
}
inline Status AlreadyExistsError(std::string_view m) {
  return Status(StatusCode::kAlreadyExists, m);
}
inline Status PermissionDeniedError(std::string_view m) {
  return Status(StatusCode::kPermissionDenied, m);
}
inline Status ResourceExhaustedError(std::string_view m) {
  return Status(StatusCode::kResourceExhausted, m);
}
inline Status FailedPreconditionError(std::string_view m) {
  return Status(StatusCode::kFailedPrecondition, m);
}
inline Status AbortedError(std::string_view m) {
  return Status(StatusCode::kAborted, m);
}
inline Status OutOfRangeError(std::string_view m) {
  return Status(StatusCode::kOutOfRange, m);
}
inline Status UnimplementedError(std::string_view m) {
  return Status(StatusCode::kUnimplemented, m);
}
inline Status InternalError(std::string_view m) {
  return Status(StatusCode::kInternal, m);
}
inline Status UnavailableError(std::string_view m) {
  return Status(StatusCode::kUnavailable, m);
}
inline Status DataLossError(std::string_view m) {
  return Status(StatusCode::kDataLoss, m);
}
inline bool IsInvalidArgument(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument;
}
inline bool IsUnimplemented(const Status& s) {
  return s.code() == StatusCode::kUnimplemented;
}
inline bool IsFailedPrecondition(const Status& s) {
  return s.code() == StatusCode::kFailedPrecondition;
}
inline bool IsResourceExhausted(const Status& s) {
  return s.code() == StatusCode::kResourceExhausted;
}
inline bool IsUnavailable(const Status& s) {
  return s.code() == StatusCode::kUnavailable;
}
inline bool IsInternal(const Status& s) {
  return s.code() == StatusCode::kInternal;
}

// A T or the Status saying why there is none.
template <typename T>
class StatusOr {
 public:
  // An error (an OK status here is a bug: it becomes an internal error).
  StatusOr(const Status& status)  // NOLINT: implicit by design.
      : status_(status.ok() ? InternalError("StatusOr made from an OK status")
                            : status) {}
  StatusOr(Status&& status)  // NOLINT
      : status_(status.ok() ? InternalError("StatusOr made from an OK status")
                            : std::move(status)) {}
  template <
      typename S,
      std::enable_if_t<status_internal::IsForeignStatus<S>::value, int> = 0>
  StatusOr(const S& status)  // NOLINT
      : StatusOr(Status(status)) {}

  // A value (anything T is made from, not a status).
  template <typename U = T,
            std::enable_if_t<
                std::is_constructible_v<T, U&&> &&
                    !std::is_same_v<std::decay_t<U>, Status> &&
                    !std::is_same_v<std::decay_t<U>, StatusOr> &&
                    !status_internal::IsForeignStatus<std::decay_t<U>>::value &&
                    !status_internal::IsForeignStatusOr<std::decay_t<U>>::value,
                int> = 0>
  StatusOr(U&& value)  // NOLINT
      : value_(std::in_place, std::forward<U>(value)) {}

  // From another library's StatusOr holding something T is made from.
  template <typename R,
            std::enable_if_t<status_internal::IsForeignStatusOr<R>::value &&
                                 std::is_constructible_v<
                                     T, status_internal::ValueOfStatusOr<R>>,
                             int> = 0>
  StatusOr(R&& other)  // NOLINT
      : status_(other.status()) {
    if (other.ok()) value_.emplace(std::forward<R>(other).value());
  }

  // To another library's StatusOr of something made from T.
  template <typename R,
            std::enable_if_t<status_internal::IsForeignStatusOr<R>::value &&
                                 std::is_constructible_v<
                                     status_internal::ValueOfStatusOr<R>, T>,
                             int> = 0>
  operator R() const& {  // NOLINT
    if (!ok()) {
      return R(static_cast<status_internal::StatusOfStatusOr<R>>(status_));
    }
    return R(*value_);
  }
  template <typename R,
            std::enable_if_t<status_internal::IsForeignStatusOr<R>::value &&
                                 std::is_constructible_v<
                                     status_internal::ValueOfStatusOr<R>, T>,
                             int> = 0>
  operator R() && {  // NOLINT
    if (!ok()) {
      return R(static_cast<status_internal::StatusOfStatusOr<R>>(status_));
    }
    return R(std::move(*value_));
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const& { return status_; }
  Status status() && { return std::move(status_); }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  template <typename U>
  T value_or(U&& fallback) const& {
    return ok() ? *value_ : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  Status status_;  // OK when value_ holds a value.
  std::optional<T> value_;
};

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_STATUS_H_
