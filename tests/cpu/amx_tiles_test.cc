// The CPU plugin's AMX tile GEMMs against products computed here in double
// from the same bf16 values: exact inputs, f32 accumulation of 64 or 512
// terms, so within a few f32 ulps of the sum of magnitudes. Keys that do not
// fill the last tile (padding) must contribute nothing. Skipped where the
// CPU or the kernel offers no tiles (the attention's oneDNN path runs
// there, and the conformance suite covers both).
#include "backends/cpu/gemm/amx_tiles.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "gtest/gtest.h"
#include "mixrt/float_convert.h"
#include "tests/testing/uniform_floats.h"

namespace mixrt::cpu {
namespace {

std::vector<uint16_t> RandomBf16(int64_t n, uint32_t seed) {
  std::vector<uint16_t> v;
  for (float x : testing::UniformFloats(n, seed))
    v.push_back(sdk::F32ToBF16Bits(x));
  return v;
}

double F(uint16_t b) { return sdk::BF16BitsToF32(b); }

// f32 accumulation of `terms` products: each add rounds (2^-24 relative of
// the running sum), bounded by the sum of magnitudes.
double Tolerance(double magnitudes, int terms) {
  return magnitudes * terms * std::ldexp(1.0, -24) + 1e-30;
}

TEST(AmxTiles, ScoresAreQueriesTimesKeys) {
  if (!AmxTilesUsable()) GTEST_SKIP() << "no AMX tiles on this machine";
  for (int64_t e : {32, 64, 128}) {
    // The last chunk: keys 512..1099 and 20 padding keys.
    const int64_t rows = 64, keys = 1100, j0 = 512, cols = 608;
    const std::vector<uint16_t> q = RandomBf16(rows * e, 1);
    const std::vector<uint16_t> k = RandomBf16(keys * e, 2);
    std::vector<uint16_t> packed(AmxPaddedKeys(keys) * e);
    AmxPackKeys(k.data(), keys, e, packed.data());
    const int64_t lds = cols + 16;
    std::vector<float> scores(rows * lds, NAN);
    AmxScores(q.data(), rows, e, packed.data() + j0 * e, cols, scores.data(),
              lds);
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        double want = 0, mag = 0;
        if (j0 + j < keys) {
          for (int64_t c = 0; c < e; ++c) {
            want += F(q[i * e + c]) * F(k[(j0 + j) * e + c]);
            mag += std::abs(F(q[i * e + c]) * F(k[(j0 + j) * e + c]));
          }
        }
        ASSERT_NEAR(scores[i * lds + j], want, Tolerance(mag, e))
            << "e=" << e << " row " << i << " key " << j0 + j;
      }
    }
  }
}

// The row maxima found while storing: each row's largest real score (the
// padding keys' 0 left out: every real score here is negative), and NaN
// for each row of a 32-row strip holding a NaN score, only there.
TEST(AmxTiles, ScoresReportEachRowsMaximum) {
  if (!AmxTilesUsable()) GTEST_SKIP() << "no AMX tiles on this machine";
  const int64_t rows = 96, e = 64, keys = 1100, j0 = 512, cols = 608;
  const int64_t valid = keys - j0, lds = cols + 16;
  std::vector<uint16_t> q = RandomBf16(rows * e, 5);
  std::vector<uint16_t> k = RandomBf16(keys * e, 6);
  // Scores q.k < 0: q's dims positive, k's negative.
  for (uint16_t& b : q) b &= 0x7fff;
  for (uint16_t& b : k) b |= 0x8000;
  q[40 * e + 3] = sdk::F32ToBF16Bits(NAN);  // Row 40: strip 32..63.
  std::vector<uint16_t> packed(AmxPaddedKeys(keys) * e);
  AmxPackKeys(k.data(), keys, e, packed.data());
  std::vector<float> scores(rows * lds), row_max(rows);
  AmxScores(q.data(), rows, e, packed.data() + j0 * e, cols, scores.data(), lds,
            valid, row_max.data());
  for (int64_t i = 0; i < rows; ++i) {
    if (i >= 32 && i < 64) {
      EXPECT_TRUE(std::isnan(row_max[i])) << "row " << i;
      continue;
    }
    double want = -INFINITY;
    for (int64_t j = 0; j < valid; ++j) {
      double dot = 0;
      for (int64_t c = 0; c < e; ++c) {
        dot += F(q[i * e + c]) * F(k[(j0 + j) * e + c]);
      }
      want = std::max(want, dot);
    }
    ASSERT_LT(want, 0) << "row " << i;
    EXPECT_NEAR(row_max[i], want, Tolerance(std::abs(want), e)) << "row " << i;
  }
}

TEST(AmxTiles, WeightedValuesAccumulate) {
  if (!AmxTilesUsable()) GTEST_SKIP() << "no AMX tiles on this machine";
  for (int64_t ev : {32, 64}) {
    const int64_t rows = 96, keys = 1100, j0 = 512, cols = 608, ldw = cols + 16;
    const std::vector<uint16_t> v = RandomBf16(keys * ev, 3);
    const std::vector<uint16_t> w = RandomBf16(rows * ldw, 4);
    std::vector<uint16_t> packed(AmxPaddedKeys(keys) * ev);
    AmxPackValues(v.data(), keys, ev, packed.data());
    std::vector<float> acc(rows * ev);
    for (int64_t i = 0; i < rows * ev; ++i) acc[i] = 0.5f * (i % 7);
    const std::vector<float> before = acc;
    AmxAccumulateWeightedValues(w.data(), rows, cols, ldw,
                                packed.data() + j0 * ev, ev, acc.data());
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t c = 0; c < ev; ++c) {
        double want = before[i * ev + c], mag = std::abs(want);
        // Keys past 1100 are padding: zero values, whatever the weight.
        for (int64_t j = 0; j0 + j < keys; ++j) {
          want += F(w[i * ldw + j]) * F(v[(j0 + j) * ev + c]);
          mag += std::abs(F(w[i * ldw + j]) * F(v[(j0 + j) * ev + c]));
        }
        ASSERT_NEAR(acc[i * ev + c], want, Tolerance(mag, cols + 1))
            << "ev=" << ev << " row " << i << " column " << c;
      }
    }
  }
}

// Run with ONEDNN_MAX_CPU_ISA below AMX (MIXRT_EXPECT_NO_AMX set): the cap
// that turns off oneDNN's tiles turns off these too.
TEST(AmxTiles, TheOneDnnIsaCapTurnsThemOff) {
  if (std::getenv("MIXRT_EXPECT_NO_AMX") == nullptr) {
    GTEST_SKIP() << "runs in the capped variant";
  }
  EXPECT_FALSE(AmxTilesUsable());
}

}  // namespace
}  // namespace mixrt::cpu
