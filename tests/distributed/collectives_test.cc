// The collectives on MPI, run under mpirun -np 2 (mpirun_test.sh): every
// expected value is written from the ranks' inputs by hand.
#include <cmath>
#include <limits>

#include "core/distributed/process_group.h"
#include "core/tensor/factories.h"
#include "gtest/gtest.h"
#include "tests/distributed/mpi_group.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using distributed::ReduceOp;
using testing::CpuDevice;
using testing::Group;

std::vector<float> Reduced(std::vector<float> values, DType dtype,
                           ReduceOp op) {
  Tensor t = *from_floats(values, {static_cast<int64_t>(values.size())}, dtype,
                          CpuDevice());
  auto work = Group()->AllReduce(t, op);
  EXPECT_TRUE(work.ok()) << work.status();
  EXPECT_TRUE(work->Wait().ok());
  return *t.to_float_vector();
}

TEST(CollectivesTest, RunsOnTwoRanks) {
  ASSERT_EQ(Group()->world_size(), 2) << "run under mpirun -np 2";
  EXPECT_NE(Group()->description().find("Open MPI"), std::string::npos)
      << Group()->description();
}

TEST(CollectivesTest, AllReduceSumAvgMaxInEveryFloatDtype) {
  const float r = static_cast<float>(Group()->rank());
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    // Ranks 0 and 1 hold {1, -2, 0.5} * (r + 1) and r * 4.
    const std::vector<float> in = {1 * (r + 1), -2 * (r + 1), 0.5f * (r + 1),
                                   4 * r};
    EXPECT_EQ(Reduced(in, dtype, ReduceOp::kSum),
              (std::vector<float>{3, -6, 1.5f, 4}));
    EXPECT_EQ(Reduced(in, dtype, ReduceOp::kAvg),
              (std::vector<float>{1.5f, -3, 0.75f, 2}));
    EXPECT_EQ(Reduced(in, dtype, ReduceOp::kMax),
              (std::vector<float>{2, -2, 1, 4}));
  }
}

TEST(CollectivesTest, SixteenBitSumsRoundToNearestEven) {
  // Ranks hold 1 and 1 + 2^-7 (bf16 keeps 7 bits after the point): the sum
  // 2 + 2^-7 lies halfway between the bf16s 2 and 2 + 2^-6, and ties go to
  // the even one, 2. An f32 sum would keep 2.0078125.
  const float mine = Group()->rank() == 0 ? 1.0f : 1.0078125f;
  EXPECT_EQ(Reduced({mine}, DType::kBF16, ReduceOp::kSum),
            std::vector<float>{2.0f});
  EXPECT_EQ(Reduced({mine}, DType::kF32, ReduceOp::kSum),
            std::vector<float>{2.0078125f});
  // f16 keeps 10 bits: the same sum is exact there.
  EXPECT_EQ(Reduced({mine}, DType::kF16, ReduceOp::kSum),
            std::vector<float>{2.0078125f});
}

TEST(CollectivesTest, AllReducesLargerThanOnePieceReduceEveryElement) {
  // The MPI plugin all-reduces in pieces of 4 MiB (the
  // collectives_chunked_mpi_test target: 12 bytes): 1M + 5 f32 elements and
  // 2M + 3 bf16 ones span pieces and end in a ragged one.
  const float r = static_cast<float>(Group()->rank());
  for (const auto& [dtype, n] :
       {std::pair{DType::kF32, (int64_t{1} << 20) + 5},
        std::pair{DType::kBF16, (int64_t{2} << 20) + 3}}) {
    SCOPED_TRACE(DTypeName(dtype));
    // Element i holds (i % 7 - 3) * (r + 1) on rank r: small integers,
    // exact in bf16, whose sum over the ranks is (i % 7 - 3) * 3.
    std::vector<float> in(n);
    for (int64_t i = 0; i < n; ++i) in[i] = (i % 7 - 3) * (r + 1);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      const std::vector<float> out = Reduced(in, dtype, op);
      ASSERT_EQ(static_cast<int64_t>(out.size()), n);
      int64_t wrong = 0, first_wrong = -1;
      for (int64_t i = 0; i < n; ++i) {
        const float want = (i % 7 - 3) * (op == ReduceOp::kSum ? 3.0f : 1.5f);
        if (out[i] != want && wrong++ == 0) first_wrong = i;
      }
      EXPECT_EQ(wrong, 0) << "first at element " << first_wrong;
    }
  }
}

TEST(CollectivesTest, NonFiniteValuesSurviveEveryReduction) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const bool one = Group()->rank() == 1;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
      // Only rank 1 holds the inf and the NaN.
      const std::vector<float> out =
          Reduced({one ? inf : 1.0f, one ? nan : 1.0f}, dtype, op);
      EXPECT_EQ(out[0], inf);
      EXPECT_TRUE(std::isnan(out[1])) << "MPI_MAX drops a NaN; ours must not";
    }
  }
}

TEST(CollectivesTest, BroadcastAllGatherAndBarrier) {
  const int rank = Group()->rank();
  Tensor t =
      *from_ints({rank * 10 + 1, rank * 10 + 2}, {2}, DType::kI32, CpuDevice());
  const uint64_t version = t.storage()->version();
  auto bcast = Group()->Broadcast(t, 1);
  ASSERT_TRUE(bcast.ok());
  ASSERT_TRUE(bcast->Wait().ok());
  EXPECT_EQ(*t.to_int_vector(), (std::vector<int64_t>{11, 12}));
  // Written behind the runtime's back: what is keyed by the version (kept
  // autocast casts of a weight) must see a new one.
  EXPECT_GT(t.storage()->version(), version);

  Tensor mine = *from_floats({static_cast<float>(rank), 0.5f}, {2},
                             DType::kBF16, CpuDevice());
  Tensor all = *zeros({4}, DType::kBF16, CpuDevice());
  auto gather = Group()->AllGather(mine, all);
  ASSERT_TRUE(gather.ok());
  ASSERT_TRUE(gather->Wait().ok());
  EXPECT_EQ(*all.to_float_vector(), (std::vector<float>{0, 0.5f, 1, 0.5f}));
  EXPECT_TRUE(Group()->Barrier().ok());
}

TEST(CollectivesTest, BadArgumentsAreRefusedBeforeAnyRankWaits) {
  Tensor ints = *zeros({2}, DType::kI32, CpuDevice());
  auto reduce = Group()->AllReduce(ints, ReduceOp::kSum);
  EXPECT_EQ(reduce.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(reduce.status().message().find("f32, bf16 or f16"),
            std::string::npos);
  Tensor t = *zeros({4}, DType::kF32, CpuDevice());
  Tensor strided = *t.slice(0, 0, 4, 2);
  EXPECT_NE(Group()
                ->AllReduce(strided, ReduceOp::kSum)
                .status()
                .message()
                .find("contiguous"),
            std::string::npos);
  auto root = Group()->Broadcast(t, 5);
  EXPECT_NE(root.status().message().find("root 5 is not a rank"),
            std::string::npos)
      << root.status();
  Tensor small = *zeros({3}, DType::kF32, CpuDevice());
  EXPECT_NE(Group()->AllGather(t, small).status().message().find(
                "world_size (2) copies"),
            std::string::npos);
}

TEST(CollectivesTest, ManyCollectivesInFlightCompleteInIssueOrder) {
  std::vector<Tensor> tensors;
  std::vector<distributed::Work> works;
  for (int i = 0; i < 16; ++i) {
    tensors.push_back(*full({1000 + i},
                            static_cast<double>(i + Group()->rank()),
                            DType::kF32, CpuDevice()));
    works.push_back(*Group()->AllReduce(tensors.back(), ReduceOp::kSum));
  }
  for (int i = 15; i >= 0; --i) ASSERT_TRUE(works[i].Wait().ok());
  for (int i = 0; i < 16; ++i) {
    const std::vector<float> v = *tensors[i].to_float_vector();
    EXPECT_EQ(v.front(), 2 * i + 1);
    EXPECT_EQ(v.back(), 2 * i + 1);
  }
}

}  // namespace
}  // namespace mixrt
