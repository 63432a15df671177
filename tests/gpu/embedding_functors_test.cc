// Embedding lookup and gradient functors on the host against the reference.
#include "backends/gpu/embedding_functors.h"

#include <vector>

#include "backends/gpu/elementwise_functors.h"
#include "gtest/gtest.h"
#include "tests/gpu/host_launch.h"
#include "tests/gpu/host_tensor.h"

namespace mixrt::testing {
namespace {

TEST(EmbeddingFunctors, LookupAndGradientWithPaddingAndRepeats) {
  for (MixrtDtype dtype :
       {MIXRT_DTYPE_F32, MIXRT_DTYPE_F16, MIXRT_DTYPE_BF16}) {
    const HostTensor weight = HostTensor(dtype, {11, 6}).FillRandom(1);
    HostTensor indices(MIXRT_DTYPE_I64, {3, 5});
    indices.FillInts(2, 0, 10);
    indices.Set(4, 3);  // Repeats and the padding row.
    indices.Set(7, 3);
    indices.Set(9, 0);
    HostTensor want(dtype, {3, 5, 6}), got(dtype, {3, 5, 6});
    RunReference(MIXRT_OP_EMBEDDING, {&weight, &indices}, {&want}, nullptr);
    int32_t bad = 0;
    RunElementwiseOnHost(gpu::EmbeddingFunctor{got.device(), weight.device(),
                                               indices.device(), 11, 6, &bad},
                         got.numel());
    EXPECT_EQ(bad, 0);
    ExpectNear(got.Values(), want.Values(), 0, 0, "embedding lookup");

    const HostTensor grad = HostTensor(dtype, {3, 5, 6}).FillRandom(3);
    const MixrtEmbeddingAttrs attrs{sizeof(MixrtEmbeddingAttrs), nullptr, 0};
    HostTensor grad_want(dtype, {11, 6});
    RunReference(MIXRT_OP_EMBEDDING_BACKWARD, {&grad, &indices}, {&grad_want},
                 &attrs);
    HostTensor accumulator(MIXRT_DTYPE_F32, {11, 6});
    RunElementwiseOnHost(
        gpu::EmbeddingBackwardFunctor{static_cast<float*>(accumulator.data()),
                                      grad.device(), indices.device(), 11, 6,
                                      /*padding_idx=*/0, &bad},
        grad.numel());
    HostTensor grad_got(dtype, {11, 6});
    RunElementwiseOnHost(
        gpu::CopyFunctor{grad_got.device(), accumulator.device()}, 66);
    EXPECT_EQ(bad, 0);
    // Up to three rows summed in f32 then rounded once, like the reference.
    ExpectNear(grad_got.Values(), grad_want.Values(), StoreTolerance(dtype),
               1e-6, "embedding gradient");
    for (int k = 0; k < 6; ++k) EXPECT_EQ(grad_got.Get(k), 0.0) << "padding";
  }
}

TEST(EmbeddingFunctors, IndicesOutOfRangeAreFlagged) {
  const HostTensor weight = HostTensor(MIXRT_DTYPE_F32, {4, 2}).FillRandom(4);
  for (double index : {-1.0, 4.0}) {
    HostTensor indices(MIXRT_DTYPE_I64, {2});
    indices.Fill({1, index});
    HostTensor out(MIXRT_DTYPE_F32, {2, 2});
    int32_t bad = 0;
    RunElementwiseOnHost(gpu::EmbeddingFunctor{out.device(), weight.device(),
                                               indices.device(), 4, 2, &bad},
                         4);
    EXPECT_EQ(bad, 1) << index;
    HostTensor accumulator(MIXRT_DTYPE_F32, {4, 2});
    bad = 0;
    RunElementwiseOnHost(
        gpu::EmbeddingBackwardFunctor{static_cast<float*>(accumulator.data()),
                                      out.device(), indices.device(), 4, 2, -1,
                                      &bad},
        4);
    EXPECT_EQ(bad, 1) << index;
  }
}

}  // namespace
}  // namespace mixrt::testing
