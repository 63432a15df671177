// The CPU plugin's eight-blocks-at-a-time Philox against the SDK's one
// block at a time (the ABI's definition): every unit bit-identical, for
// starts inside a block, lengths that leave tails, and a counter whose low
// word wraps inside a vector.
#include "backends/cpu/kernels/philox_rows.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "plugins/sdk/attention_math.h"
#include "plugins/sdk/philox.h"

namespace mixrt::cpu {
namespace {

void ExpectSdkUnits(uint64_t seed, uint64_t offset, uint64_t first, int64_t n) {
  std::vector<float> units(n);
  PhiloxUnitsRow(seed, offset, first, n, units.data());
  for (int64_t i = 0; i < n; ++i) {
    const double want = sdk::PhiloxUniform(seed, offset, first + i, 0, 1);
    ASSERT_EQ(units[i], static_cast<float>(want))
        << "seed " << seed << " offset " << offset << " element " << first + i;
  }
}

TEST(PhiloxRows, MatchTheSdkStreamElementForElement) {
  for (uint64_t first : {0, 1, 2, 3, 4, 5, 31, 32, 33, 1000}) {
    for (int64_t n : {0, 1, 3, 4, 31, 32, 33, 64, 65, 1027}) {
      ExpectSdkUnits(0x123456789abcdefull, 7, first, n);
    }
  }
  ExpectSdkUnits(0, 0, 0, 4096);
}

TEST(PhiloxRows, CarryIntoTheHighCounterWord) {
  // Blocks 2^32 - 5 .. 2^32 + 11: the low word wraps inside the run.
  ExpectSdkUnits(42, (uint64_t{1} << 32) - 5, 0, 64);
  ExpectSdkUnits(42, (uint64_t{1} << 32) - 3, 2, 70);
  ExpectSdkUnits(42, ~uint64_t{0} - 8, 0, 96);  // The whole counter wraps.
}

// The attention's dropout factors against the SDK's row (a double compare
// of each unit with p): identical for p that f32 cannot hold (0.1, 1/3),
// one it can (0.25), 0, and p at a unit of the stream itself and just
// above it (its nearest float is that unit: the unit is dropped).
TEST(PhiloxRows, DropoutFactorsAreTheSdkAttentionRow) {
  MixrtAttentionAttrs attrs{};
  attrs.seed = 99;
  attrs.offset = 5;
  sdk::AttentionCall call{};
  call.attrs = &attrs;
  call.queries = 3;
  call.keys = 1001;
  const double unit = sdk::PhiloxUniform(attrs.seed, attrs.offset, 0, 0, 1);
  for (double p :
       {0.1, 1.0 / 3.0, 0.25, 0.7, 0.0, unit, unit + std::ldexp(1.0, -30)}) {
    attrs.dropout_p = p;
    for (int64_t g : {0, 2}) {
      for (int64_t i : {0, 1}) {
        for (int64_t j0 : {0, 3, 500}) {
          const int64_t n = call.keys - j0;
          std::vector<float> want(n), got(n);
          sdk::AttentionDropoutRow(call, g, i, j0, n, want.data());
          DropoutFactorsRow(
              attrs.seed, attrs.offset,
              static_cast<uint64_t>((g * call.queries + i) * call.keys + j0), n,
              p, got.data());
          ASSERT_EQ(got, want)
              << "p " << p << " g " << g << " i " << i << " j0 " << j0;
        }
      }
    }
  }
}

}  // namespace
}  // namespace mixrt::cpu
