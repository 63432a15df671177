// The words environment switches accept: 1/true/yes/on and, with the empty
// string, 0/false/no/off, in any case and surrounding whitespace.
#ifndef MIXRT_COMMON_ON_OFF_H_
#define MIXRT_COMMON_ON_OFF_H_

#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"

namespace mixrt {

// true or false for an accepted word; nullopt for anything else (callers
// decide whether that is an error).
inline std::optional<bool> ParseOnOff(absl::string_view value) {
  const std::string v =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v.empty() || v == "0" || v == "false" || v == "no" || v == "off") {
    return false;
  }
  return std::nullopt;
}

}  // namespace mixrt

#endif  // MIXRT_COMMON_ON_OFF_H_
