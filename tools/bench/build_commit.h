// The commit the bench was built from: 40 hex digits, "-dirty" after them
// when tracked files differed from it, or "unknown" (no git, or a build
// without scripts/workspace_status.sh).
#ifndef MIXRT_TOOLS_BENCH_BUILD_COMMIT_H_
#define MIXRT_TOOLS_BENCH_BUILD_COMMIT_H_

namespace mixrt::bench {

extern const char kBuildCommit[];

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_BUILD_COMMIT_H_
