#include "common/cpu_info_field.h"

#include <fstream>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mixrt {

std::string CpuInfoField(absl::string_view key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (absl::StripAsciiWhitespace(absl::string_view(line).substr(0, colon)) ==
        key) {
      return std::string(absl::StripAsciiWhitespace(
          absl::string_view(line).substr(colon + 1)));
    }
  }
  return "";
}

std::set<std::string> CpuFlags() {
  return absl::StrSplit(CpuInfoField("flags"), ' ', absl::SkipEmpty());
}

}  // namespace mixrt
