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

// The commit the results are from: the MIXRT_GIT_COMMIT environment
// variable (a binary copied elsewhere, a record made for another tree),
// else the commit this binary was built from (build_commit.h: its
// sources', "-dirty" when they differed from it, or "unknown"). Never the
// current directory's repository, which may hold another commit than the
// one the binary was built from.
std::string GitCommit();

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_BENCH_MACHINE_H_
