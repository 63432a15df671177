#include "plugins/sdk/status.h"

namespace mixrt::sdk {

const char* StatusCodeName(StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int i = static_cast<int>(code);
  return i >= 0 && i < 17 ? kNames[i] : "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

void Status::SetPayload(const std::string& key, std::string value) {
  if (ok()) return;  // As Abseil: an OK status carries nothing.
  auto copy =
      payloads_
          ? std::make_shared<std::map<std::string, std::string>>(*payloads_)
          : std::make_shared<std::map<std::string, std::string>>();
  (*copy)[key] = std::move(value);
  payloads_ = std::move(copy);
}

std::optional<std::string> Status::GetPayload(const std::string& key) const {
  if (!payloads_) return std::nullopt;
  auto it = payloads_->find(key);
  if (it == payloads_->end()) return std::nullopt;
  return it->second;
}

}  // namespace mixrt::sdk
