// The versions of mixrt bench's file formats: suites (bench_suite.h) and
// results (bench_result.schema.json). A reader refuses other versions.
#ifndef MIXRT_TOOLS_BENCH_BENCH_FORMAT_H_
#define MIXRT_TOOLS_BENCH_BENCH_FORMAT_H_

namespace mixrt::bench {

inline constexpr int kSuiteFormatVersion = 1;
inline constexpr int kResultFormatVersion = 1;
inline constexpr char kResultFormatName[] = "mixrt-bench-result";

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_BENCH_FORMAT_H_
