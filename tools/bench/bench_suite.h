// Benchmark suites: text files of cases, versioned and nestable (like
// benchdnn's batch files). The format, version 1:
//
//   # A comment; blank lines are ignored.
//   mixrt-bench-suite 1                  first line that is not a comment
//   include other.suite                  a path relative to this file
//   case gemm square_1024 m=1024 n=1024 k=1024
//   case mlp_train recipe batch=512 width=1024 layers=3
//
// `case KIND NAME KEY=VALUE...`: NAME ([A-Za-z0-9_.-]) is unique across the
// whole suite, values are positive integers (0 or 1 for flags). The kinds
// and their keys (defaults in parentheses):
//   gemm               m n k batch(1)                out = a @ b
//   conv               batch c h w o kernel stride(1) padding(0)
//   sdpa               batch heads seq head_dim causal(0)
//   mlp_train          batch width layers(3)         Linear+ReLU, MSE, SGD
//   mlp_infer          batch width layers(3)
//   transformer_train  batch seq width heads         TransformerBlock, MSE
//   transformer_infer  batch seq width heads
// Every kind also takes busy_cores(0): that many processes spin beside the
// timed steps, as a build sharing the machine would (the PyTorch peer runs
// beside the same).
// Errors name the file and line: "quick.suite:7: gemm needs k".
#ifndef MIXRT_TOOLS_BENCH_BENCH_SUITE_H_
#define MIXRT_TOOLS_BENCH_BENCH_SUITE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/bench/bench_format.h"

namespace mixrt::bench {

struct SuiteCase {
  std::string kind;
  std::string name;
  std::map<std::string, int64_t> params;  // Defaults filled in.
  std::string where;                      // "file:line".

  int64_t param(const std::string& key) const { return params.at(key); }
};

// The keys of `kind` with their defaults (-1: required); empty for an
// unknown kind.
std::map<std::string, int64_t> KindKeys(const std::string& kind);
std::vector<std::string> KindNames();

// Reads `path` and what it includes, in order.
absl::StatusOr<std::vector<SuiteCase>> LoadSuite(const std::string& path);
// Parses suite text; `name` is used in messages, `dir` resolves includes.
absl::StatusOr<std::vector<SuiteCase>> ParseSuite(const std::string& text,
                                                  const std::string& name,
                                                  const std::string& dir);

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_BENCH_SUITE_H_
