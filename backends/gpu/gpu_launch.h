// Launchers of the shared CUDA/HIP kernels, callable from host C++ compiled
// by g++: the definitions live in gpu_kernels.cuh and are instantiated once
// per backend by nvcc (backends/cuda/cuda_kernels.cu) or hipcc
// (backends/rocm/rocm_kernels.hip). Each returns the runtime's error code of
// the launch (0 on success) without synchronizing.
#ifndef MIXRT_BACKENDS_GPU_GPU_LAUNCH_H_
#define MIXRT_BACKENDS_GPU_GPU_LAUNCH_H_

#include <cstdint>

#include "backends/gpu/attention_functors.h"
#include "backends/gpu/batch_norm_functors.h"
#include "backends/gpu/conv_pool_functors.h"
#include "backends/gpu/elementwise_functors.h"
#include "backends/gpu/embedding_functors.h"
#include "backends/gpu/gemm_epilogue.h"
#include "backends/gpu/launch_geometry.h"
#include "backends/gpu/multi_tensor_norm_functors.h"
#include "backends/gpu/optimizer_functors.h"
#include "backends/gpu/row_functors.h"
#include "backends/gpu/tiled_gemm.h"

namespace mixrt::gpu {

struct LaunchContext {
  void* stream = nullptr;  // cudaStream_t / hipStream_t
  DeviceLimits limits;
};

// f(i) for i in [0, n).
template <typename F>
int LaunchElementwise(const LaunchContext& ctx, const F& f, int64_t n);

// The row protocol of row_functors.h over `rows` rows of `row_length`.
template <typename F>
int LaunchRows(const LaunchContext& ctx, const F& f, int64_t rows,
               int64_t row_length);

// One block per chunk of a multi-tensor launch.
int LaunchUnscale(const LaunchContext& ctx, const UnscaleChunkFunctor& f);

// The own tiled GEMM (tiled_gemm.h); used where no vendor BLAS is linked.
int LaunchTiledGemm(const LaunchContext& ctx, const TiledGemm& gemm);

#define MIXRT_GPU_FOR_EACH_ELEMENTWISE_FUNCTOR(X) \
  X(FillFunctor)                                  \
  X(ArangeFunctor)                                \
  X(RandomFunctor)                                \
  X(DropoutFunctor)                               \
  X(CopyFunctor)                                  \
  X(BinaryFunctor)                                \
  X(UnaryFunctor)                                 \
  X(CompareFunctor)                               \
  X(WhereFunctor)                                 \
  X(UpdateScaleFunctor)                           \
  X(SgdFunctor)                                   \
  X(AdamWFunctor)                                 \
  X(AdamWStepCountFunctor)                        \
  X(GemmEpilogueFunctor)                          \
  X(EmbeddingFunctor)                             \
  X(EmbeddingBackwardFunctor)                     \
  X(ReduceCombineFunctor)                         \
  X(MultiTensorNormFinish)                        \
  X(ConvForwardFunctor)                           \
  X(ConvBackwardDataFunctor)                      \
  X(PoolForwardFunctor)                           \
  X(PoolBackwardFunctor)                          \
  X(AttentionForwardRows)                         \
  X(AttentionRowDots)                             \
  X(AttentionGradQRows)                           \
  X(AttentionGradKVRows)

#define MIXRT_GPU_FOR_EACH_ROW_FUNCTOR(X) \
  X(SoftmaxRows)                          \
  X(SoftmaxBackwardRows)                  \
  X(LayerNormRows)                        \
  X(LayerNormBackwardRows)                \
  X(LayerNormParamGradColumns)            \
  X(CrossEntropyRows)                     \
  X(ReduceRows)                           \
  X(MultiTensorNormRows)                  \
  X(BatchNormChannels)                    \
  X(BatchNormBackwardChannels)            \
  X(ConvBackwardWeightsRows)

#define MIXRT_GPU_DECLARE_ELEMENTWISE(F)                                   \
  extern template int LaunchElementwise<F>(const LaunchContext&, const F&, \
                                           int64_t);
#define MIXRT_GPU_DECLARE_ROWS(F)                                            \
  extern template int LaunchRows<F>(const LaunchContext&, const F&, int64_t, \
                                    int64_t);
MIXRT_GPU_FOR_EACH_ELEMENTWISE_FUNCTOR(MIXRT_GPU_DECLARE_ELEMENTWISE)
MIXRT_GPU_FOR_EACH_ROW_FUNCTOR(MIXRT_GPU_DECLARE_ROWS)
#undef MIXRT_GPU_DECLARE_ELEMENTWISE
#undef MIXRT_GPU_DECLARE_ROWS

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_GPU_LAUNCH_H_
