// The per-op table the conformance suite prints after its cases: for each
// op (the first two parts of a case name, "binary/add") and dtype, how many
// cases passed, failed, or were not implemented (the plugin declares the op
// unsupported, per op or by its class matrix). Only failures fail the run.
#ifndef MIXRT_PLUGINS_CONFORMANCE_CONFORMANCE_TABLE_H_
#define MIXRT_PLUGINS_CONFORMANCE_CONFORMANCE_TABLE_H_

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace mixrt::conformance {

struct CellCounts {
  int passed = 0;
  int failed = 0;
  int not_implemented = 0;
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

 private:
  std::string plugin_;
  std::map<std::string, std::map<std::string, CellCounts>> cells_;
};

}  // namespace mixrt::conformance

#endif  // MIXRT_PLUGINS_CONFORMANCE_CONFORMANCE_TABLE_H_
