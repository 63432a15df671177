// max-autotune's verdict on a timed fused group (JudgeFusedGroup): faster
// wins; a tie within the timing's noise wins only when the group keeps
// intermediates out of memory; anything slower loses, and Explain's note
// says which and why.
#include "core/compiler/fusion_timing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mixrt::compiler {
namespace {

using ::testing::HasSubstr;

TEST(FusionVerdict, AFasterFusedKernelIsKeptWithItsTiming) {
  const FusionVerdict v = JudgeFusedGroup({90.0, 100.0}, 2, 0);
  EXPECT_TRUE(v.keep);
  EXPECT_EQ(v.note, " [90.0 us, its launches 100.0 us]");
}

TEST(FusionVerdict, ATieIsKeptOnlyForTheMemoryItSaves) {
  // 2.9% slower: within kFusionTimingNoise (3%).
  const FusionVerdict saves = JudgeFusedGroup({102.9, 100.0}, 2, 4 << 20);
  EXPECT_TRUE(saves.keep);
  EXPECT_THAT(
      saves.note,
      HasSubstr("[102.9 us, its launches 100.0 us: a tie within 3%, kept "
                "for the 4194304 bytes it does not store]"));
  const FusionVerdict stores_all = JudgeFusedGroup({102.9, 100.0}, 2, 0);
  EXPECT_FALSE(stores_all.keep);
  EXPECT_EQ(stores_all.note, "slower than its 2 launches (102.9 vs 100.0 us)");
}

TEST(FusionVerdict, ASlowerFusedKernelIsRefusedWhateverItSaves) {
  const FusionVerdict v = JudgeFusedGroup({103.2, 100.0}, 3, 4 << 20,
                                          ", timed by an earlier compile");
  EXPECT_FALSE(v.keep);
  EXPECT_EQ(v.note,
            "slower than its 3 launches (103.2 vs 100.0 us, timed by an "
            "earlier compile)");
}

}  // namespace
}  // namespace mixrt::compiler
