// What mixrt bench runs through Python: the PyTorch peer (pytorch_peer.py:
// the same cases, sizes, precisions, modes and thread count, in the same
// JSON shape) and the plots (plot_bench.py, matplotlib).
#ifndef MIXRT_TOOLS_BENCH_BENCH_PEERS_H_
#define MIXRT_TOOLS_BENCH_BENCH_PEERS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tools/bench/bench_run.h"
#include "tools/bench/bench_suite.h"

namespace mixrt::bench {

// argv[0], to find the scripts in Bazel's runfiles or beside the binary.
void SetScriptLocator(const char* argv0);

// The peer's results; an error saying how to install it when its Python
// cannot import it ($PYTHON, ~/torchvenv/bin/python, python3 are tried).
absl::StatusOr<nlohmann::json> RunPeer(const std::string& peer,
                                       const std::vector<SuiteCase>& cases,
                                       const RunOptions& options);

absl::Status Plot(const std::string& results_json, const std::string& dir);

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_BENCH_PEERS_H_
