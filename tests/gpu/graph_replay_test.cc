// The host logic of the CUDA plugin's kernel graphs: replay only for the
// bases captured with, capture again otherwise, and run the steps as
// launches after a failed capture or when bases keep changing.
#include "backends/gpu/graph_replay.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mixrt::gpu {
namespace {

using ::testing::HasSubstr;
using Action = GraphReplay::Action;

TEST(GraphReplay, ReplaysOnlyForTheBasesItCapturedWith) {
  GraphReplay r;
  int a = 0, b = 0, c = 0;
  const std::vector<void*> first = {&a, &b}, second = {&a, &c};
  EXPECT_EQ(r.Next(first), Action::kCapture);
  r.Captured(first);
  EXPECT_EQ(r.Next(first), Action::kReplay);
  r.Replayed();
  EXPECT_EQ(r.Next(second), Action::kCapture);
  r.Captured(second);
  EXPECT_EQ(r.Next(second), Action::kReplay);
  EXPECT_EQ(r.Next(first), Action::kCapture);
  // A different number of buffers never replays.
  EXPECT_EQ(r.Next(std::vector<void*>{&a}), Action::kCapture);
  EXPECT_TRUE(r.launch_reason().empty());
}

TEST(GraphReplay, AFailedCaptureLaunchesFromThenOnWithTheReason) {
  GraphReplay r;
  int a = 0;
  const std::vector<void*> bases = {&a};
  r.Captured(bases);
  r.CaptureFailed("cudaErrorStreamCaptureUnsupported in step 2 (matmul)");
  EXPECT_EQ(r.Next(bases), Action::kLaunch);
  EXPECT_THAT(r.launch_reason(),
              HasSubstr("capture failed: cudaErrorStreamCaptureUnsupported"));
}

TEST(GraphReplay, BasesThatKeepChangingStopCapturing) {
  GraphReplay r;
  std::vector<int> memory(GraphReplay::kCapturesBeforeJudging + 1);
  for (int i = 0; i < GraphReplay::kCapturesBeforeJudging; ++i) {
    const std::vector<void*> bases = {&memory[i]};
    ASSERT_EQ(r.Next(bases), Action::kCapture);
    r.Captured(bases);
  }
  EXPECT_TRUE(r.launch_reason().empty());
  const std::vector<void*> last = {&memory.back()};
  r.Captured(last);
  EXPECT_EQ(r.Next(last), Action::kLaunch);
  EXPECT_THAT(r.launch_reason(), HasSubstr("changed on 9 of 9 runs"));
}

TEST(GraphReplay, StableBasesKeepReplayingPastTheJudgement) {
  GraphReplay r;
  std::vector<int> memory(2);
  for (int i = 0; i < 40; ++i) {
    const std::vector<void*> bases = {&memory[i % 20 == 0 ? 1 : 0]};
    if (r.Next(bases) == Action::kReplay) {
      r.Replayed();
    } else {
      ASSERT_EQ(r.Next(bases), Action::kCapture);
      r.Captured(bases);
    }
  }
  EXPECT_TRUE(r.launch_reason().empty()) << r.launch_reason();
  EXPECT_GT(r.replays(), 30);
}

}  // namespace
}  // namespace mixrt::gpu
