// The per-op table the conformance suite prints after its cases: for each
// op (the first two parts of a case name, "binary/add") and dtype, how many
// cases passed, failed, or were not implemented (the plugin declares the op
// unsupported, per op or by its class matrix). Only failures fail the run.
#ifndef MIXRT_PLUGINS_CONFORMANCE_CONFORMANCE_TABLE_H_
#define MIXRT_PLUGINS_CONFORMANCE_CONFORMANCE_TABLE_H_

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace mixrt::conformance {

struct CellCounts {
  int passed = 0;
  int failed = 0;
  int not_implemented = 0;
  // Over the cases that compared values (-1: none did): the worst error
  // as a fraction of its tolerance, and in absolute terms.
  double worst_error_of_tolerance = -1;
  double worst_absolute_error = -1;
  // Per timed case (conformance --matrix): microseconds per call.
  std::vector<double> plugin_us, reference_us;
};

// Collects case results as gtest reports them and prints the table at the
// end of the run.
class ConformanceTable : public ::testing::EmptyTestEventListener {
 public:
  explicit ConformanceTable(std::string plugin) : plugin_(std::move(plugin)) {}

  void OnTestEnd(const ::testing::TestInfo& info) override;
  void OnTestProgramEnd(const ::testing::UnitTest& unit) override;

  // op -> dtype ("f32", "f16", "bf16" or "-") -> counts.
  const std::map<std::string, std::map<std::string, CellCounts>>& cells()
      const {
    return cells_;
  }
  std::string Format() const;

  // The plugin matrix: op x dtype x status x worst error against the
  // reference x measured speed, as JSON and as a Markdown page.
  nlohmann::json MatrixJson(const std::string& reference) const;
  std::string MatrixMarkdown(const std::string& reference) const;

 private:
  std::string plugin_;
  std::map<std::string, std::map<std::string, CellCounts>> cells_;
};

}  // namespace mixrt::conformance

#endif  // MIXRT_PLUGINS_CONFORMANCE_CONFORMANCE_TABLE_H_
