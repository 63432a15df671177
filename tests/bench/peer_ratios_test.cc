// mixrt bench's peer ratios over rounds on synthetic runs: pairs within a
// round only, the median and range of a row's rounds, cut-off peers
// counted and left out of the ratio, and the geometric mean per precision.
#include "tools/bench/peer_ratios.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mixrt::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

nlohmann::json Row(const std::string& c, const std::string& backend,
                   const std::string& precision, double median_ms, int round) {
  nlohmann::json r = {{"case", c},
                      {"backend", backend},
                      {"precision", precision},
                      {"mode", "eager"},
                      {"status", "ok"},
                      {"timing", {{"median_ms", median_ms}}}};
  if (round > 0) r["round"] = round;
  return r;
}

TEST(PeerRatios, PairsWithinRoundsAndTakesTheMedian) {
  // Rounds 1-3 of gemm: the peer's medians drift (8, 12, 20 ms), mixrt's
  // too (10, 10, 10): ratios 0.8, 1.2, 2.0 -> median 1.2.
  nlohmann::json run = {{"results", nlohmann::json::array()},
                        {"peers", nlohmann::json::array()}};
  const double peer_ms[] = {8, 12, 20};
  for (int round = 1; round <= 3; ++round) {
    run["results"].push_back(Row("gemm", "cpu", "f32", 10, round));
    run["peers"].push_back(
        Row("gemm", "pytorch", "f32", peer_ms[round - 1], round));
  }
  const std::vector<PeerRatioRow> rows = PeerRatios(run);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].case_name, "gemm");
  EXPECT_EQ(rows[0].peer, "pytorch");
  EXPECT_THAT(rows[0].ratios, ElementsAre(0.8, 1.2, 2.0));
  EXPECT_DOUBLE_EQ(rows[0].median, 1.2);
  EXPECT_DOUBLE_EQ(rows[0].min, 0.8);
  EXPECT_DOUBLE_EQ(rows[0].max, 2.0);
}

TEST(PeerRatios, NeverPairsAcrossRounds) {
  // The peer ran only in round 2; mixrt's round-1 row has no partner.
  nlohmann::json run = {
      {"results",
       {Row("sdpa", "cpu", "f32", 4, 1), Row("sdpa", "cpu", "f32", 5, 2)}},
      {"peers", {Row("sdpa", "pytorch", "f32", 10, 2)}}};
  const std::vector<PeerRatioRow> rows = PeerRatios(run);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_THAT(rows[0].ratios, ElementsAre(2.0));
}

TEST(PeerRatios, ARunWithoutRoundsIsOneRound) {
  nlohmann::json run = {{"results", {Row("conv", "cpu", "bf16", 2, 0)}},
                        {"peers", {Row("conv", "pytorch", "bf16", 3, 0)}}};
  const std::vector<PeerRatioRow> rows = PeerRatios(run);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_THAT(rows[0].ratios, ElementsAre(1.5));
}

TEST(PeerRatios, CutOffPeersAreCountedNotDivided) {
  nlohmann::json cut = Row("gemm", "pytorch", "bf16", 0, 2);
  cut["status"] = "cut_off";
  cut.erase("timing");
  nlohmann::json run = {
      {"results",
       {Row("gemm", "cpu", "bf16", 10, 1), Row("gemm", "cpu", "bf16", 10, 2)}},
      {"peers", {Row("gemm", "pytorch", "bf16", 30, 1), cut}}};
  const std::vector<PeerRatioRow> rows = PeerRatios(run);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_THAT(rows[0].ratios, ElementsAre(3.0));
  EXPECT_EQ(rows[0].cut_off_rounds, 1);
  EXPECT_THAT(PeerRatioMarkdown(rows), HasSubstr("peer cut off in 1 round"));
}

TEST(PeerRatios, MarkdownHasEachPrecisionsGeometricMean) {
  // f32: 2x and 0.5x -> 1.00x; bf16: 4x alone.
  nlohmann::json run = {
      {"results",
       {Row("a", "cpu", "f32", 1, 0), Row("b", "cpu", "f32", 4, 0),
        Row("a", "cpu", "bf16", 1, 0)}},
      {"peers",
       {Row("a", "pytorch", "f32", 2, 0), Row("b", "pytorch", "f32", 2, 0),
        Row("a", "pytorch", "bf16", 4, 0)}}};
  const std::string md = PeerRatioMarkdown(PeerRatios(run));
  EXPECT_THAT(md, HasSubstr("| a | cpu | f32 | eager | pytorch | 1 | 2.00x |"));
  EXPECT_THAT(md, HasSubstr("| b | cpu | f32 | eager | pytorch | 1 | 0.50x |"));
  EXPECT_THAT(md, HasSubstr("f32: geometric mean of the medians 1.00x over 2"));
  EXPECT_THAT(md,
              HasSubstr("bf16: geometric mean of the medians 4.00x over 1"));
}

TEST(PeerRatios, NoPeersNoTable) {
  nlohmann::json run = {{"results", {Row("a", "cpu", "f32", 1, 0)}},
                        {"peers", nlohmann::json::array()}};
  EXPECT_TRUE(PeerRatios(run).empty());
  EXPECT_EQ(PeerRatioMarkdown(PeerRatios(run)), "");
  EXPECT_TRUE(PeerRatios(nlohmann::json::object()).empty());
}

}  // namespace
}  // namespace mixrt::bench
