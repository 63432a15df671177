// The ROCm plugin's tiled GEMM, run block by block and phase by phase on the
// host, and the separate matmul epilogue of the CUDA plugin, against the
// reference plugin's matmul.
#include "backends/gpu/tiled_gemm.h"

#include <cmath>
#include <string>
#include <vector>

#include "backends/gpu/gemm_epilogue.h"
#include "gtest/gtest.h"
#include "tests/gpu/host_launch.h"
#include "tests/gpu/host_tensor.h"

namespace mixrt::testing {
namespace {

struct Case {
  int64_t batch, m, k, n;
};

// Tile-edge shapes: smaller than a tile, not multiples of 64 or 16, k = 0.
const Case kCases[] = {{1, 1, 1, 1},
                       {1, 65, 33, 67},
                       {2, 64, 16, 64},
                       {3, 5, 100, 130},
                       {1, 7, 0, 9}};

// Sums of k products of N(0,1) values in f32 against double: the error grows
// like sqrt(k) f32 ulps of the terms, far below the scale-relative 1e-5.
double MatmulTolerance(MixrtDtype out) { return StoreTolerance(out) + 1e-5; }

TEST(TiledGemm, MatchesReferenceMatmulWithEveryEpilogue) {
  for (MixrtDtype dtype :
       {MIXRT_DTYPE_F32, MIXRT_DTYPE_F16, MIXRT_DTYPE_BF16}) {
    for (MixrtDtype out_dtype : {dtype, MIXRT_DTYPE_F32}) {
      for (const Case& c : kCases) {
        for (uint32_t act = MIXRT_ACTIVATION_NONE;
             act <= MIXRT_ACTIVATION_GELU_TANH; ++act) {
          for (float beta : {0.0f, 1.0f}) {
            const HostTensor a =
                HostTensor(dtype, {c.batch, c.m, c.k}).FillRandom(1);
            const HostTensor b =
                HostTensor(dtype, {c.batch, c.k, c.n}).FillRandom(2);
            const HostTensor bias = HostTensor(dtype, {c.n}).FillRandom(3);
            const HostTensor init =
                HostTensor(out_dtype, {c.batch, c.m, c.n}).FillRandom(4);
            HostTensor want = init.Clone(), got = init.Clone();
            const MixrtMatmulAttrs attrs{sizeof(MixrtMatmulAttrs), nullptr, act,
                                         beta};
            RunReference(MIXRT_OP_MATMUL, {&a, &b, &bias}, {&want}, &attrs);
            gpu::TiledGemm gemm;
            gemm.a = a.device();
            gemm.b = b.device();
            gemm.out = got.device();
            gemm.epilogue.bias = bias.device();
            gemm.epilogue.has_bias = true;
            gemm.epilogue.activation = act;
            gemm.epilogue.beta = beta;
            gemm.m = c.m;
            gemm.n = c.n;
            gemm.k = c.k;
            gemm.batch = c.batch;
            RunTiledGemmOnHost(gemm);
            ExpectNear(got.Values(), want.Values(), MatmulTolerance(out_dtype),
                       1.0 + std::sqrt(static_cast<double>(c.k)),
                       "tiled gemm " + std::to_string(c.m) + "x" +
                           std::to_string(c.k) + "x" + std::to_string(c.n) +
                           " dtype " + std::to_string(dtype) + " out " +
                           std::to_string(out_dtype) + " act " +
                           std::to_string(act) + " beta " +
                           std::to_string(beta));
          }
        }
      }
    }
  }
}

TEST(TiledGemm, LaterLaunchesOfASplitBatchStartAtTheirOffset) {
  gpu::TiledGemm gemm;
  gemm.m = 100;
  gemm.n = 70;
  gemm.batch = 70000;
  const gpu::TiledGemmGrid grid = gemm.Grid();
  EXPECT_EQ(grid.x, 2);
  EXPECT_EQ(grid.y, 2);
  EXPECT_EQ(grid.z, 70000);
  gemm.batch_offset = 65535;
  const gpu::TileCoord tile = gemm.Tile(1, 1, 4);
  EXPECT_EQ(tile.batch, 65539);
  EXPECT_EQ(tile.row0, 64);
  EXPECT_EQ(tile.col0, 64);
}

TEST(GemmEpilogue, SeparatePassMatchesReferenceMatmul) {
  // The product without epilogue, in f32, as cuBLASLt would leave it.
  const HostTensor a = HostTensor(MIXRT_DTYPE_BF16, {9, 40}).FillRandom(5);
  const HostTensor b = HostTensor(MIXRT_DTYPE_BF16, {40, 11}).FillRandom(6);
  const HostTensor bias = HostTensor(MIXRT_DTYPE_BF16, {11}).FillRandom(7);
  HostTensor product(MIXRT_DTYPE_F32, {9, 11});
  const MixrtMatmulAttrs plain{sizeof(MixrtMatmulAttrs), nullptr,
                               MIXRT_ACTIVATION_NONE, 0.0f};
  HostTensor a32 = HostTensor(MIXRT_DTYPE_F32, {9, 40}),
             b32 = HostTensor(MIXRT_DTYPE_F32, {40, 11});
  for (int64_t i = 0; i < a.numel(); ++i) a32.Set(i, a.Get(i));
  for (int64_t i = 0; i < b.numel(); ++i) b32.Set(i, b.Get(i));
  RunReference(MIXRT_OP_MATMUL, {&a32, &b32}, {&product}, &plain);
  for (uint32_t act = MIXRT_ACTIVATION_NONE; act <= MIXRT_ACTIVATION_GELU_TANH;
       ++act) {
    const HostTensor init = HostTensor(MIXRT_DTYPE_BF16, {9, 11}).FillRandom(8);
    HostTensor want = init.Clone(), got = init.Clone();
    const MixrtMatmulAttrs attrs{sizeof(MixrtMatmulAttrs), nullptr, act, 0.5f};
    RunReference(MIXRT_OP_MATMUL, {&a, &b, &bias}, {&want}, &attrs);
    gpu::GemmEpilogueFunctor f;
    f.out = got.device();
    f.product = product.device();
    f.epilogue.bias = bias.device();
    f.epilogue.has_bias = true;
    f.epilogue.activation = act;
    f.epilogue.beta = 0.5f;
    f.n = 11;
    RunElementwiseOnHost(f, got.numel());
    ExpectNear(got.Values(), want.Values(), MatmulTolerance(MIXRT_DTYPE_BF16),
               1.0, "epilogue act " + std::to_string(act));
  }
}

}  // namespace
}  // namespace mixrt::testing
