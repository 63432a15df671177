// The suites shipped with mixrt bench (tools/bench/suites/), compiled in so
// an installed binary has them.
#ifndef MIXRT_TOOLS_BENCH_EMBEDDED_SUITES_H_
#define MIXRT_TOOLS_BENCH_EMBEDDED_SUITES_H_

namespace mixrt::bench {

extern const char kDefaultSuite[];
extern const char kQuickSuite[];

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_EMBEDDED_SUITES_H_
