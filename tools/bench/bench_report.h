// A benchmark run as JSON (the format tools/bench/bench_result.schema.json
// describes, version 1), a Markdown table and CSV.
#ifndef MIXRT_TOOLS_BENCH_BENCH_REPORT_H_
#define MIXRT_TOOLS_BENCH_BENCH_REPORT_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/bench/bench_format.h"
#include "tools/bench/bench_run.h"

namespace mixrt::bench {

nlohmann::json ResultJson(const CaseResult& r);
// The whole run: format, version, when, the command, the machine, results,
// and peers' results (an array, possibly empty).
nlohmann::json RunJson(const std::vector<CaseResult>& results,
                       const nlohmann::json& machine,
                       const std::string& command, const nlohmann::json& peers);

// One row per result: median time, its 95% CI, GFLOP/s, speed over the same
// case in f32, peak memory, and the status with its reason. Peers' results
// (the `peers` array of RunJson) get rows of their own and a "vs peer"
// column pairs each mixrt row with the peer's same case and precision.
std::string MarkdownTable(const nlohmann::json& run);
std::string CsvTable(const nlohmann::json& run);

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_BENCH_REPORT_H_
