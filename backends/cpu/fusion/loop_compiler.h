// Generated fused-loop source (plugins/sdk/loop_codegen) built by the
// system C++ compiler into shared objects kept in the mixrt cache
// directory (cpu_loops/, named by a hash of the source, the compiler and
// this CPU's instruction-set flags), loaded with dlopen. The directory
// must be this user's alone (common/trusted_path.h), else nothing is built
// or loaded and loops run interpreted, with the reason. Builds happen in a
// scratch directory of their own, under a time limit; each object ends
// with a checksum, and one that fails it, the ELF check or dlsym is
// rebuilt, never trusted; it is opened once and loaded through that
// descriptor. The cache keeps its most recently used objects
// (MIXRT_CPU_LOOP_CACHE_MAX_OBJECTS, 512). Where nothing can be kept on
// disk the objects go to a directory of this process's own, removed at
// exit.
//
// MIXRT_CPU_CODEGEN picks when: "sync" (the default: compiling a graph
// waits for its groups' builds, 60-130 ms each on these machines and
// nothing once cached, so the first run and max-autotune's timing already
// see generated code), "async" (a group's first runs use the interpreter
// while one background thread builds it: for a server that must answer at
// once) or "off" (the interpreter only).
#ifndef MIXRT_BACKENDS_CPU_FUSION_LOOP_COMPILER_H_
#define MIXRT_BACKENDS_CPU_FUSION_LOOP_COMPILER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mixrt::cpu {

// `<name>_host` of a generated loop: runs units [begin, end).
using LoopEntry = void (*)(void* const* args, long long begin, long long end);

enum class CodegenMode { kOff, kAsync, kSync };

// MIXRT_CPU_CODEGEN, read on each call (tests switch it); an unknown word
// is an error naming the accepted ones.
absl::StatusOr<CodegenMode> CodegenModeFromEnv();

// The compiler command ($CXX, which may carry arguments of its own, else
// c++) with its version line, or why there is none (not on PATH, not
// runnable, not finishing within MIXRT_CPU_CODEGEN_TIMEOUT_S, or a loop
// cache another user could write to). Probed once per process.
struct SystemCompiler {
  std::vector<std::string> argv;
  std::string command;  // argv, joined.
  std::string version;
  std::string missing;  // Non-empty: nothing is built, and why.
};
const SystemCompiler& FindSystemCompiler();

// Where `name`'s object from `source` is kept (tests plant broken ones).
std::string CachedLoopPath(const std::string& source, const std::string& name);

// The entry of a loop already built in the cache, or nullptr (not built,
// or built but not loadable: then it is removed for a rebuild).
LoopEntry LoadCachedLoop(const std::string& source, const std::string& name);

// Builds (or loads from the cache) `name`'s entry from `source`. Blocks for
// the compiler; thread-safe. The error names the compiler's first lines.
absl::StatusOr<LoopEntry> BuildLoop(const std::string& source,
                                    const std::string& name);

// Runs BuildLoop on the background builder thread (one build at a time:
// these machines have two cores) and then `done` there with its result.
void BuildLoopInBackground(std::string source, std::string name,
                           std::function<void(absl::StatusOr<LoopEntry>)> done);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSION_LOOP_COMPILER_H_
