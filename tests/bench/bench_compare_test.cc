// `mixrt bench compare` on synthetic runs: ratios, geometric means, the
// significance test on raw samples, regressions past a threshold, and
// refusing files that are not results.
#include "tools/bench/bench_compare.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mixrt::bench {
namespace {

using ::testing::HasSubstr;

nlohmann::json Result(const std::string& c, const std::string& backend,
                      std::vector<double> samples) {
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  return {{"case", c},
          {"backend", backend},
          {"precision", "f32"},
          {"mode", "eager"},
          {"status", "ok"},
          {"timing",
           {{"samples", samples}, {"median_ms", sorted[sorted.size() / 2]}}}};
}

nlohmann::json RunDoc(std::vector<nlohmann::json> results, std::string cpu) {
  return {{"format", "mixrt-bench-result"},
          {"version", 1},
          {"machine", {{"cpu", cpu}, {"mixrt_commit", "0123456789abcdef"}}},
          {"results", results},
          {"peers", nlohmann::json::array()}};
}

TEST(BenchCompare, ARunWithRoundsComparesItsFastestRound) {
  nlohmann::json slow = Result("gemm", "cpu", {20, 20.1, 19.9, 20.2});
  slow["round"] = 1;
  nlohmann::json fast = Result("gemm", "cpu", {10, 10.1, 9.9, 10.2});
  fast["round"] = 2;
  const nlohmann::json base =
      RunDoc({Result("gemm", "cpu", {10, 10.1, 9.9, 10.2})}, "A");
  // Either order: neither the first nor the last round wins, the fastest.
  for (const nlohmann::json& b :
       {RunDoc({slow, fast}, "B"), RunDoc({fast, slow}, "B")}) {
    auto c = Compare({base, b}, {"a", "b"}, {});
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ(c->rows.size(), 1u);
    EXPECT_NEAR(c->rows[0].cells[1].speedup, 1.0, 1e-9);
    EXPECT_FALSE(c->rows[0].cells[1].significant);
  }
}

TEST(BenchCompare, RatiosSignificanceAndGeometricMean) {
  // gemm: twice as fast, clearly; sdpa: the same distribution.
  const nlohmann::json a = RunDoc(
      {Result("gemm", "cpu", {10, 10.2, 9.9, 10.1, 10.05, 9.95, 10, 10.1}),
       Result("sdpa", "cpu", {5, 5.1, 4.9, 5.05, 4.95, 5, 5.02, 4.98}),
       Result("only_a", "cpu", {1, 1, 1})},
      "machine A");
  const nlohmann::json b =
      RunDoc({Result("gemm", "cpu", {5, 5.1, 4.95, 5.05, 5.02, 4.98, 5, 5.01}),
              Result("sdpa", "cpu", {4.98, 5.02, 5, 4.95, 5.05, 4.9, 5.1, 5})},
             "machine B");
  auto c = Compare({a, b}, {"a.json", "b.json"}, {});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->rows.size(), 3u);
  const CompareRow& gemm = c->rows[0];
  EXPECT_EQ(gemm.key, "gemm cpu f32 eager");
  EXPECT_NEAR(gemm.cells[1].speedup, 10.05 / 5.01, 1e-9);
  EXPECT_TRUE(gemm.cells[1].significant);
  EXPECT_LT(gemm.cells[1].p_value, 0.001);
  const CompareRow& only = c->rows[1];
  EXPECT_FALSE(only.cells[1].present);
  const CompareRow& sdpa = c->rows[2];
  EXPECT_FALSE(sdpa.cells[1].significant);
  EXPECT_NEAR(c->geomean_speedup[1],
              std::sqrt(gemm.cells[1].speedup * sdpa.cells[1].speedup), 1e-9);
  EXPECT_THAT(c->labels[1], HasSubstr("b.json (machine B, 0123456789)"));
  // B is no regression; A against B is one (gemm, 0.5x).
  EXPECT_TRUE(Regressions(*c, 0.05).empty());
  auto reverse = Compare({b, a}, {"b.json", "a.json"}, {});
  ASSERT_TRUE(reverse.ok());
  EXPECT_THAT(
      Regressions(*reverse, 0.05),
      ::testing::ElementsAre(HasSubstr("gemm cpu f32 eager (run 1): 0.50x")));
  EXPECT_TRUE(Regressions(*reverse, 0.6).empty());  // Under the threshold.
  const std::string table = ComparisonMarkdown(*c);
  EXPECT_THAT(table,
              HasSubstr("| gemm cpu f32 eager | 10.050 | 5.010 | 2.01x |"));
  EXPECT_THAT(table, HasSubstr("(n.s.)"));
}

TEST(BenchCompare, AnyBackendMatchesTheFastestPerCase) {
  const nlohmann::json a = RunDoc({Result("gemm", "cpu", {10, 10, 10})}, "A");
  const nlohmann::json b = RunDoc(
      {Result("gemm", "cuda", {1, 1, 1}), Result("gemm", "cpu", {9, 9, 9})},
      "B");
  CompareOptions options;
  options.any_backend = true;
  auto c = Compare({a, b}, {"a", "b"}, options);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->rows.size(), 1u);
  EXPECT_EQ(c->rows[0].key, "gemm * f32 eager");
  EXPECT_DOUBLE_EQ(c->rows[0].cells[1].speedup, 10.0);
}

TEST(BenchCompare, RefusesWhatIsNotAResult) {
  const nlohmann::json good = RunDoc({}, "A");
  auto one = Compare({good}, {"a"}, {});
  EXPECT_FALSE(one.ok());
  auto other = Compare({good, nlohmann::json{{"format", "pytest"}}},
                       {"a", "junk.json"}, {});
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("junk.json: not a mixrt bench result"));
  nlohmann::json v2 = good;
  v2["version"] = 2;
  auto newer = Compare({good, v2}, {"a", "v2.json"}, {});
  ASSERT_FALSE(newer.ok());
  EXPECT_THAT(std::string(newer.status().message()),
              HasSubstr("v2.json: result format version 2; this mixrt reads "
                        "version 1"));
  // Fields of another type than the format says (fuzz/bench_input found
  // the first: nlohmann's value() threw a type error, an abort).
  auto refused = [&](const nlohmann::json& doc) {
    auto c = Compare({good, doc}, {"a", "odd.json"}, {});
    EXPECT_FALSE(c.ok());
    return c.ok() ? std::string() : std::string(c.status().message());
  };
  EXPECT_THAT(refused(nlohmann::json::parse(
                  R"({"format":[{"case":17,"status":"ok"}]})")),
              HasSubstr("odd.json: not a mixrt bench result"));
  nlohmann::json text_version = good;
  text_version["version"] = "1";
  EXPECT_THAT(refused(text_version),
              HasSubstr("odd.json: result format version \"1\""));
  nlohmann::json no_version = good;
  no_version.erase("version");
  EXPECT_THAT(refused(no_version),
              HasSubstr("odd.json: result format version null"));
  // A machine description of another type is only a label: "?".
  nlohmann::json odd_machine = good;
  odd_machine["machine"] = {{"cpu", 3},
                            {"mixrt_commit", nlohmann::json::array()}};
  auto labelled = Compare({good, odd_machine}, {"a", "odd.json"}, {});
  ASSERT_TRUE(labelled.ok()) << labelled.status();
  EXPECT_THAT(labelled->labels[1], HasSubstr("odd.json (?, unknown)"));
}

// Malformed result files end in an error naming what is wrong, never an
// abort (five of them threw JSON type errors), and results that cannot be
// compared are refused: no samples (an empty list turned a 5x slowdown
// into "n.s." and passed --fail_above), a median of 0 ("infx").
TEST(BenchCompare, MalformedResultsAreErrorsNotAborts) {
  const nlohmann::json base =
      RunDoc({Result("g", "cpu", {1, 1.1, 0.9, 1, 1})}, "A");
  auto error = [&](const nlohmann::json& other) {
    auto c = Compare({base, other}, {"base.json", "bad.json"}, {});
    EXPECT_FALSE(c.ok());
    return c.ok() ? std::string() : std::string(c.status().message());
  };
  nlohmann::json r = Result("g", "cpu", {5, 5.5, 4.5, 5, 5});
  nlohmann::json bad = r;
  bad["case"] = 17;
  EXPECT_THAT(error(RunDoc({bad}, "B")),
              HasSubstr("result 0 has no string \"case\""));
  bad = r;
  bad["timing"] = "fast";
  EXPECT_THAT(error(RunDoc({bad}, "B")),
              HasSubstr("has no \"timing\" with a number"));
  bad = r;
  bad["timing"]["samples"] = {1, "x"};
  EXPECT_THAT(error(RunDoc({bad}, "B")),
              HasSubstr("a sample that is not a positive time"));
  bad = r;
  bad["timing"]["samples"] = nlohmann::json::array();
  EXPECT_THAT(error(RunDoc({bad}, "B")),
              HasSubstr("has 0 samples; a comparison needs at least 3"));
  bad = r;
  bad["timing"]["median_ms"] = 0;
  EXPECT_THAT(error(RunDoc({bad}, "B")),
              HasSubstr("has median_ms 0; expected a positive time"));
  nlohmann::json doc = RunDoc({r}, "B");
  doc["results"] = "none";
  EXPECT_THAT(error(doc), HasSubstr("\"results\" is not a list of results"));
  doc["results"] = {42};
  EXPECT_THAT(error(doc), HasSubstr("result 0 is not an object"));
}

}  // namespace
}  // namespace mixrt::bench
