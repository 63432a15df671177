// PyTorch's verdicts on overlapping reads and writes
// (core/kernels/memory_overlap.h, after ATen's MemoryOverlap.cpp), and
// copy_ acting on them: the same elements are left alone, a partial
// overlap of dense tensors or a destination that repeats elements is
// refused, and a source with gaps that meets its destination is read as
// it was before the write.
#include "core/kernels/memory_overlap.h"

#include <vector>

#include "core/kernels/fill_copy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt::kernels {
namespace {

using ::testing::HasSubstr;
using testing::MakeTensor;
using testing::Values;

Tensor Square(int64_t n) {
  std::vector<float> v(n * n);
  for (int64_t i = 0; i < n * n; ++i) v[i] = static_cast<float>(i);
  return MakeTensor(testing::ReferenceDevice(), v, {n, n});
}

TEST(MemoryOverlap, VerdictsAreATens) {
  const Tensor m = Square(4);
  const Tensor t = *m.transpose(0, 1);
  const Tensor top = *m.slice(0, 0, 3), bottom = *m.slice(0, 1, 4);
  const Tensor left = *m.slice(1, 0, 3), right = *m.slice(1, 1, 4);
  const Tensor other = Square(4);
  EXPECT_EQ(OverlapOf(m, m), MemoryOverlap::kFull);
  EXPECT_EQ(OverlapOf(m, *m.slice(0, 0, 4)), MemoryOverlap::kFull);
  EXPECT_EQ(OverlapOf(m, t), MemoryOverlap::kPartial);
  EXPECT_EQ(OverlapOf(top, bottom), MemoryOverlap::kPartial);
  EXPECT_EQ(OverlapOf(*m.slice(0, 0, 2), *m.slice(0, 2, 4)),
            MemoryOverlap::kNo);
  EXPECT_EQ(OverlapOf(left, right), MemoryOverlap::kTooHard);
  EXPECT_EQ(OverlapOf(m, other), MemoryOverlap::kNo);
  EXPECT_TRUE(IsNonOverlappingAndDense(t));
  EXPECT_FALSE(IsNonOverlappingAndDense(left));
  EXPECT_TRUE(MayShareElements(left, right));
  EXPECT_FALSE(MayShareElements(*m.slice(0, 0, 2), *m.slice(0, 2, 4)));
}

TEST(MemoryOverlap, CopyRefusesWhatPyTorchRefuses) {
  const Tensor m = Square(4);
  const std::vector<double> before = Values(m);
  const absl::Status transposed = copy_(m, *m.transpose(0, 1));
  EXPECT_TRUE(absl::IsFailedPrecondition(transposed)) << transposed;
  EXPECT_THAT(transposed.message(),
              HasSubstr("refer to a single memory location. Please clone()"));
  EXPECT_FALSE(copy_(*m.slice(0, 1, 4), *m.slice(0, 0, 3)).ok());
  EXPECT_EQ(Values(m), before);
  const Tensor row = *Square(4).slice(0, 0, 1);
  const absl::Status repeated =
      copy_(*row.expand({3, 4}), *Square(4).slice(0, 0, 3));
  EXPECT_THAT(repeated.message(),
              HasSubstr("more than one element of the written-to tensor"));
  EXPECT_TRUE(copy_(m, m).ok());
  EXPECT_EQ(Values(m), before);
}

TEST(MemoryOverlap, ASourceWithGapsIsReadAsItWas) {
  const Tensor m = Square(4);
  ASSERT_TRUE(copy_(*m.slice(1, 1, 4), *m.slice(1, 0, 3)).ok());
  // Each row i: [4i, 4i, 4i + 1, 4i + 2] (columns shifted right once, not
  // the first column smeared across the row).
  std::vector<double> want;
  for (int i = 0; i < 4; ++i) {
    want.insert(want.end(), {4.0 * i, 4.0 * i, 4.0 * i + 1, 4.0 * i + 2});
  }
  EXPECT_EQ(Values(m), want);
}

}  // namespace
}  // namespace mixrt::kernels
