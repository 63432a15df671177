// The record of the machine and software a benchmark ran on, so that two
// runs can be told apart and compared: CPU, ISA features that matter, memory,
// threads, every plugin (name, version, ABI, build line, capabilities), the
// mixrt commit and build, and the environment variables that change
// behaviour (MIXRT_*, ONEDNN_*, DNNL_*, OMP_*, KMP_*, CUDA_*, HIP_*).
#ifndef MIXRT_TOOLS_BENCH_BENCH_MACHINE_H_
#define MIXRT_TOOLS_BENCH_BENCH_MACHINE_H_

#include "core/plugin/registry.h"
#include "nlohmann/json.hpp"

namespace mixrt::bench {

nlohmann::json MachineRecord(const Registry& registry);

// "abc123..." from the MIXRT_GIT_COMMIT environment variable, else `git
// rev-parse HEAD` in the workspace `bazel run` was started from, else
// "unknown".
std::string GitCommit();

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_BENCH_MACHINE_H_
