// `mixrt bench` reads suite files and result files users hand it: any
// bytes as a suite parse into cases or an error naming file and line, and
// any bytes as a result file compare against a valid run or give an error
// naming what is wrong (never an uncaught JSON type error, an abort). The
// first byte picks: odd, the rest is a suite; even, a result file.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_input.h"
#include "nlohmann/json.hpp"
#include "tools/bench/bench_compare.h"
#include "tools/bench/bench_suite.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mixrt::fuzz::FuzzInput in(data, size);
  const bool suite = in.Read<uint8_t>() & 1;
  const std::string rest = in.Rest();
  if (suite) {
    // Includes resolve against a directory that does not exist: the
    // parser, not the file system, is under test.
    auto cases =
        mixrt::bench::ParseSuite(rest, "fuzz.suite", "/nonexistent-mixrt-fuzz");
    if (!cases.ok() && cases.status().message().empty()) std::abort();
    return 0;
  }
  const nlohmann::json other =
      nlohmann::json::parse(rest, nullptr, /*allow_exceptions=*/false);
  if (other.is_discarded()) return 0;
  const nlohmann::json base = {
      {"format", "mixrt-bench-result"},
      {"version", 1},
      {"results",
       {{{"case", "g"},
         {"backend", "cpu"},
         {"precision", "f32"},
         {"mode", "eager"},
         {"status", "ok"},
         {"timing", {{"samples", {1.0, 1.1, 0.9}}, {"median_ms", 1.0}}}}}}};
  auto c = mixrt::bench::Compare({base, other}, {"base.json", "fuzz.json"}, {});
  if (c.ok()) {
    (void)mixrt::bench::ComparisonMarkdown(*c);
    (void)mixrt::bench::Regressions(*c, 0.05);
  } else if (c.status().message().empty()) {
    std::abort();
  }
  return 0;
}
