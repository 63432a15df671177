#include "plugins/conformance/conformance_table.h"

#include <cstdio>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace mixrt::conformance {
namespace {

constexpr const char* kDtypes[] = {"f32", "f16", "bf16", "-"};

std::string Cell(const CellCounts& c) {
  std::vector<std::string> parts;
  if (c.failed > 0) parts.push_back(absl::StrCat(c.failed, " FAIL"));
  if (c.passed > 0) parts.push_back(absl::StrCat(c.passed, " ok"));
  if (c.not_implemented > 0) {
    parts.push_back(absl::StrCat(c.not_implemented, " n/i"));
  }
  return parts.empty() ? "" : absl::StrJoin(parts, ", ");
}

}  // namespace

void ConformanceTable::OnTestEnd(const ::testing::TestInfo& info) {
  // Case names are "group/variant/.../dtype", registered as suite "group"
  // and test "variant/.../dtype".
  const std::string name =
      absl::StrCat(info.test_suite_name(), "/", info.name());
  const std::vector<std::string> parts = absl::StrSplit(name, '/');
  std::string dtype = "-";
  for (const char* d : kDtypes) {
    if (parts.back() == d) dtype = d;
  }
  // "multi_tensor_norm/f32" is the op itself in f32.
  const bool variant_named = parts.size() >= 2 && parts[1] != dtype;
  const std::string op =
      variant_named ? absl::StrCat(parts[0], "/", parts[1]) : parts[0];
  CellCounts& cell = cells_[op][dtype];
  const ::testing::TestResult& result = *info.result();
  if (result.Failed()) {
    ++cell.failed;
  } else if (result.Skipped()) {
    ++cell.not_implemented;
  } else {
    ++cell.passed;
  }
}

std::string ConformanceTable::Format() const {
  std::string out = absl::StrCat(
      "\nconformance table for '", plugin_,
      "' (cases per op and dtype: ok, FAIL, n/i = not implemented: the "
      "plugin declares the op unsupported)\n");
  absl::StrAppendFormat(&out, "%-36s %-18s %-18s %-18s %s\n", "op", "f32",
                        "f16", "bf16", "other");
  CellCounts total;
  for (const auto& [op, by_dtype] : cells_) {
    std::string row = absl::StrFormat("%-36s", op);
    for (const char* d : kDtypes) {
      auto it = by_dtype.find(d);
      const std::string cell = it == by_dtype.end() ? "" : Cell(it->second);
      absl::StrAppendFormat(&row, " %-18s", cell);
      if (it != by_dtype.end()) {
        total.passed += it->second.passed;
        total.failed += it->second.failed;
        total.not_implemented += it->second.not_implemented;
      }
    }
    out += std::string(absl::StripTrailingAsciiWhitespace(row)) + "\n";
  }
  absl::StrAppend(&out, "total: ", total.passed, " ok, ", total.failed,
                  " failed, ", total.not_implemented, " not implemented\n");
  return out;
}

void ConformanceTable::OnTestProgramEnd(const ::testing::UnitTest&) {
  std::printf("%s", Format().c_str());
  std::fflush(stdout);
}

}  // namespace mixrt::conformance
