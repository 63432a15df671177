// Flag values are checked before any work starts: a bad one is refused
// with the flag's name and the accepted range, instead of an abort
// (std::length_error, SIGFPE) or an unbounded allocation deep inside.
#ifndef MIXRT_EXAMPLES_FLAG_CHECKS_H_
#define MIXRT_EXAMPLES_FLAG_CHECKS_H_

#include <cmath>
#include <cstdint>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace mixrt::examples {

inline absl::Status CheckFlag(absl::string_view flag, int64_t value, int64_t lo,
                              int64_t hi) {
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "=", value, " is out of range; expected ", lo, " to ", hi));
  }
  return absl::OkStatus();
}

// A finite value in (lo, hi].
inline absl::Status CheckFiniteFlag(absl::string_view flag, double value,
                                    double lo, double hi) {
  if (!(value > lo && value <= hi) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", value,
                     " is out of range; expected a "
                     "finite value above ",
                     lo, " and at most ", hi));
  }
  return absl::OkStatus();
}

// Parses the command line after saying what the program does: --help
// prints `usage` and the program's flags (without it, absl prints a
// warning that no usage message was set).
inline void ParseFlags(int argc, char** argv, absl::string_view usage) {
  absl::SetProgramUsageMessage(usage);
  absl::ParseCommandLine(argc, argv);
}

}  // namespace mixrt::examples

#endif  // MIXRT_EXAMPLES_FLAG_CHECKS_H_
