#include "plugins/conformance/conformance_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "plugins/conformance/conformance_harness.h"

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
  for (int i = 0; i < result.test_property_count(); ++i) {
    const ::testing::TestProperty& p = result.GetTestProperty(i);
    double value = 0;
    if (!absl::SimpleAtod(p.value(), &value)) continue;
    const std::string key = p.key();
    if (key == kWorstErrorOfTolerance) {
      cell.worst_error_of_tolerance =
          std::max(cell.worst_error_of_tolerance, value);
    } else if (key == kWorstAbsoluteError) {
      cell.worst_absolute_error = std::max(cell.worst_absolute_error, value);
    } else if (key == kPluginMicroseconds && value > 0) {
      cell.plugin_us.push_back(value);
    } else if (key == kReferenceMicroseconds && value > 0) {
      cell.reference_us.push_back(value);
    }
  }
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

namespace {

// The table's "-": a case named for no floating dtype (integers, casts).
std::string DtypeLabel(const std::string& dtype) {
  return dtype == "-" ? "other" : dtype;
}

double GeometricMean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double log_sum = 0;
  for (double v : values) log_sum += std::log(v);
  return std::exp(log_sum / values.size());
}

// "ok", "FAIL", "n/i" or a mix ("3 ok, 1 n/i"): the cell's status in words.
std::string Status(const CellCounts& c) {
  if (c.failed > 0) return "FAIL";
  if (c.passed > 0 && c.not_implemented == 0) return "ok";
  if (c.passed == 0 && c.not_implemented > 0) return "n/i";
  return Cell(c);
}

}  // namespace

nlohmann::json ConformanceTable::MatrixJson(
    const std::string& reference) const {
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& [op, by_dtype] : cells_) {
    for (const char* dtype : kDtypes) {
      const auto found = by_dtype.find(dtype);
      if (found == by_dtype.end()) continue;
      const CellCounts& c = found->second;
      nlohmann::json cell = {{"op", op},
                             {"dtype", DtypeLabel(dtype)},
                             {"status", Status(c)},
                             {"ok", c.passed},
                             {"failed", c.failed},
                             {"not_implemented", c.not_implemented}};
      if (c.worst_error_of_tolerance >= 0) {
        cell["worst_error_of_tolerance"] = c.worst_error_of_tolerance;
        cell["worst_absolute_error"] = c.worst_absolute_error;
      }
      if (!c.plugin_us.empty()) {
        cell["plugin_us"] = GeometricMean(c.plugin_us);
        if (c.reference_us.size() == c.plugin_us.size()) {
          cell["reference_us"] = GeometricMean(c.reference_us);
          cell["speed_vs_reference"] =
              GeometricMean(c.reference_us) / GeometricMean(c.plugin_us);
        }
      }
      cells.push_back(cell);
    }
  }
  return {{"plugin", plugin_},
          {"reference", reference},
          {"tolerances",
           "plugins/conformance/conformance_harness.h: one unit in the last "
           "place of the result dtype for exact ops, 16 f32 units more for "
           "transcendental ones, plus accumulation bounds for sums and "
           "matmuls"},
          {"cells", cells}};
}

std::string ConformanceTable::MatrixMarkdown(
    const std::string& reference) const {
  std::string out = absl::StrCat(
      "# Plugin matrix: ", plugin_, "\n\n",
      "Every op and dtype of the conformance suite on the `", plugin_,
      "` plugin, checked against the `", reference,
      "` plugin. *worst error* is the worst element's error as a fraction "
      "of its tolerance (0: bit for bit; above 1 fails; tolerances in "
      "`plugins/conformance/conformance_harness.h`) and in absolute terms; "
      "*us* is microseconds per call on the suite's small shapes (geometric "
      "mean over the cases, best of three), *vs reference* the reference "
      "plugin's time over this plugin's. Cases that run several ops or "
      "check properties rather than values show no error. Generated by "
      "`scripts/plugin_matrix.sh`; do not edit.\n\n",
      "| op | dtype | status | cases | worst error (of tolerance) | worst "
      "absolute error | us | vs reference |\n",
      "|---|---|---|---:|---:|---:|---:|---:|\n");
  for (const auto& [op, by_dtype] : cells_) {
    for (const char* dtype : kDtypes) {
      const auto found = by_dtype.find(dtype);
      if (found == by_dtype.end()) continue;
      const CellCounts& c = found->second;
      const bool compared = c.worst_error_of_tolerance >= 0;
      const double plugin_us = GeometricMean(c.plugin_us);
      const bool timed = plugin_us > 0;
      const bool vs = timed && c.reference_us.size() == c.plugin_us.size();
      absl::StrAppend(
          &out, "| ", op, " | ", DtypeLabel(dtype), " | ", Status(c), " | ",
          c.passed + c.failed + c.not_implemented, " | ",
          compared ? absl::StrFormat("%.3g", c.worst_error_of_tolerance) : "",
          " | ",
          compared ? absl::StrFormat("%.3g", c.worst_absolute_error) : "",
          " | ", timed ? absl::StrFormat("%.1f", plugin_us) : "", " | ",
          vs ? absl::StrFormat("%.2fx",
                               GeometricMean(c.reference_us) / plugin_us)
             : "",
          " |\n");
    }
  }
  return out;
}

void ConformanceTable::OnTestProgramEnd(const ::testing::UnitTest&) {
  std::printf("%s", Format().c_str());
  std::fflush(stdout);
}

}  // namespace mixrt::conformance
