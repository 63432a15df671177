// The suite format's parser: what it accepts, and that every mistake is
// reported with file:line and what was expected.
#include "tools/bench/bench_suite.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mixrt::bench {
namespace {

using ::testing::HasSubstr;

std::string Error(const std::string& text) {
  auto parsed = ParseSuite(text, "t.suite", ".");
  EXPECT_FALSE(parsed.ok());
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

TEST(BenchSuite, ParsesCasesWithDefaults) {
  auto cases = ParseSuite(
      "# a comment\n\nmixrt-bench-suite 1\n"
      "case gemm g1 m=8 n=4 k=2   # trailing comment\n"
      "case sdpa a1 batch=1 heads=2 seq=16 head_dim=8\n",
      "t.suite", ".");
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_EQ(cases->size(), 2u);
  EXPECT_EQ((*cases)[0].kind, "gemm");
  EXPECT_EQ((*cases)[0].param("m"), 8);
  EXPECT_EQ((*cases)[0].param("batch"), 1);  // Default.
  EXPECT_EQ((*cases)[0].where, "t.suite:4");
  EXPECT_EQ((*cases)[1].param("causal"), 0);
}

TEST(BenchSuite, EveryKindTakesBusyCores) {
  auto cases = ParseSuite(
      "mixrt-bench-suite 1\n"
      "case gemm g1 m=8 n=4 k=2 busy_cores=2\n"
      "case mlp_train m1 batch=4 width=8\n",
      "t.suite", ".");
  ASSERT_TRUE(cases.ok()) << cases.status();
  EXPECT_EQ((*cases)[0].param("busy_cores"), 2);
  EXPECT_EQ((*cases)[1].param("busy_cores"), 0);  // Default: none.
  for (const std::string& kind : KindNames()) {
    EXPECT_EQ(KindKeys(kind).count("busy_cores"), 1u) << kind;
  }
  auto many =
      ParseSuite("mixrt-bench-suite 1\ncase gemm g m=8 n=4 k=2 busy_cores=65\n",
                 "t.suite", ".");
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("busy_cores <= 64"), std::string::npos)
      << many.status();
}

TEST(BenchSuite, EveryMistakeNamesFileAndLine) {
  EXPECT_THAT(
      Error("case gemm g m=1 n=1 k=1\n"),
      HasSubstr("t.suite:1: expected the header 'mixrt-bench-suite 1'"));
  EXPECT_THAT(Error("mixrt-bench-suite 2\n"),
              HasSubstr("t.suite:1: suite format version 2; this mixrt reads "
                        "version 1"));
  EXPECT_THAT(Error("mixrt-bench-suite 1\ncase gemm g m=1 n=1\n"),
              HasSubstr("t.suite:2: gemm needs k"));
  EXPECT_THAT(Error("mixrt-bench-suite 1\ncase matmul g m=1\n"),
              HasSubstr("t.suite:2: unknown case kind 'matmul' (known: conv, "
                        "gemm,"));
  EXPECT_THAT(Error("mixrt-bench-suite 1\n\ncase gemm g m=1 n=1 k=x\n"),
              HasSubstr("t.suite:3: k=x is not a non-negative integer"));
  EXPECT_THAT(Error("mixrt-bench-suite 1\ncase gemm g m=1 n=1 k=1 q=2\n"),
              HasSubstr("t.suite:2: 'q=2' is not KEY=VALUE with a key of gemm "
                        "(batch, busy_cores, k, m, n)"));
  EXPECT_THAT(Error("mixrt-bench-suite 1\ncase gemm g m=1 n=1 k=1 m=2\n"),
              HasSubstr("t.suite:2: m is given twice"));
  EXPECT_THAT(Error("mixrt-bench-suite 1\ncase gemm g m=1 n=1 k=1\n"
                    "case gemm g m=2 n=2 k=2\n"),
              HasSubstr("t.suite:3: a case named 'g' is already in the suite"));
  EXPECT_THAT(Error("mixrt-bench-suite 1\ncase gemm g/h m=1 n=1 k=1\n"),
              HasSubstr("t.suite:2: case name 'g/h' must be"));
  EXPECT_THAT(Error("mixrt-bench-suite 1\nrun gemm\n"),
              HasSubstr("t.suite:2: unknown directive 'run'"));
  EXPECT_THAT(Error("# only comments\n"), HasSubstr("t.suite: empty suite"));
}

TEST(BenchSuite, IncludesNestAndCyclesAreRefused) {
  std::string dir = ::testing::TempDir();
  while (!dir.empty() && dir.back() == '/') dir.pop_back();
  std::ofstream(dir + "/inner.suite")
      << "mixrt-bench-suite 1\ncase gemm inner_g m=2 n=2 k=2\n";
  std::ofstream(dir + "/outer.suite")
      << "mixrt-bench-suite 1\ncase gemm outer_g m=1 n=1 k=1\n"
         "include inner.suite\n";
  auto cases = LoadSuite(dir + "/outer.suite");
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_EQ(cases->size(), 2u);
  EXPECT_EQ((*cases)[1].name, "inner_g");
  EXPECT_EQ((*cases)[1].where, dir + "/inner.suite:2");

  std::ofstream(dir + "/a.suite") << "mixrt-bench-suite 1\ninclude b.suite\n";
  std::ofstream(dir + "/b.suite") << "mixrt-bench-suite 1\ninclude a.suite\n";
  auto cycle = LoadSuite(dir + "/a.suite");
  ASSERT_FALSE(cycle.ok());
  EXPECT_THAT(std::string(cycle.status().message()),
              HasSubstr("includes itself"));
  auto missing = ParseSuite("mixrt-bench-suite 1\ninclude nowhere.suite\n",
                            "t.suite", dir);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("t.suite:2: cannot read suite file"));
}

// Hostile and careless suites: a FIFO is refused, not waited on; files
// that include each other many times over are read once each (14 files
// including each other 10 times each were 10^13 reads); a value larger
// than the benchmark runs is refused (layers=100000000 crashed).
TEST(BenchSuite, FifosIncludeStormsAndHugeValuesAreRefused) {
  std::string dir = ::testing::TempDir();
  while (!dir.empty() && dir.back() == '/') dir.pop_back();
  const std::string fifo = dir + "/fifo.suite";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto from_fifo = LoadSuite(fifo);
  ASSERT_FALSE(from_fifo.ok());
  EXPECT_THAT(std::string(from_fifo.status().message()),
              HasSubstr("not a regular file"));

  // A chain, no cycle: file i includes file i + 1 ten times.
  for (int i = 0; i < 14; ++i) {
    std::ofstream f(dir + "/storm" + std::to_string(i) + ".suite");
    f << "mixrt-bench-suite 1\n";
    for (int r = 0; i < 13 && r < 10; ++r)
      f << "include storm" << i + 1 << ".suite\n";
  }
  auto storm = LoadSuite(dir + "/storm0.suite");
  ASSERT_FALSE(storm.ok());
  EXPECT_THAT(std::string(storm.status().message()),
              HasSubstr("is included a second time"));

  EXPECT_THAT(
      Error("mixrt-bench-suite 1\ncase mlp_train big batch=8 width=64 "
            "layers=100000000\n"),
      HasSubstr(
          "t.suite:2: layers=100000000 is larger than this benchmark runs "
          "(layers <= 1024)"));
  EXPECT_THAT(Error("mixrt-bench-suite 1\ncase gemm g m=99999999 n=2 k=2\n"),
              HasSubstr("m=99999999 is larger than this benchmark runs"));
}

}  // namespace
}  // namespace mixrt::bench
