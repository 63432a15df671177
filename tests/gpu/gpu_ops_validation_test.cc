// The host side of the GPU plugins' op dispatch, run on a machine without a
// GPU: every malformed call is refused with a clear InvalidArgument before
// anything reaches the device, and a well-formed call whose launch cannot
// happen (no driver) comes back as an error value naming the kernel, never a
// crash.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backends/gpu/gpu_ops.h"
#include "backends/gpu/matmul_call.h"
#include "gtest/gtest.h"
#include "tests/gpu/host_tensor.h"

namespace mixrt::testing {
namespace {

struct Call {
  std::vector<MixrtTensorDesc> in, out;
  sdk::KernelCall call;
  Call(MixrtOp op, const std::vector<const HostTensor*>& inputs,
       const std::vector<const HostTensor*>& outputs, const void* attrs) {
    for (const HostTensor* t : inputs) in.push_back(t->desc());
    for (const HostTensor* t : outputs) out.push_back(t->desc());
    call.op = op;
    for (const MixrtTensorDesc& d : in) call.inputs.emplace_back(d);
    for (const MixrtTensorDesc& d : out) call.outputs.emplace_back(d);
    call.attrs = attrs;
  }
};

// Runs one call on a device object that has no GPU behind it.
absl::Status RunOnNoDevice(MixrtOp op,
                           const std::vector<const HostTensor*>& inputs,
                           const std::vector<const HostTensor*>& outputs,
                           const void* attrs) {
  static gpu::GpuDevice device;  // Null stream and flag: nothing to reach.
  Call c(op, inputs, outputs, attrs);
  return gpu::RunOp(device, c.call);
}

void ExpectRefused(const absl::Status& s, const std::string& words) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find(words), std::string::npos) << s;
}

TEST(GpuOpsValidation, MalformedCallsAreRefusedBeforeTheDevice) {
  const HostTensor f32(MIXRT_DTYPE_F32, {2, 3}), f16(MIXRT_DTYPE_F16, {2, 3}),
      other(MIXRT_DTYPE_F32, {3, 2}), i32(MIXRT_DTYPE_I32, {2}),
      i64(MIXRT_DTYPE_I64, {2}), vec(MIXRT_DTYPE_F32, {2}),
      scalar(MIXRT_DTYPE_F32, {1}), f16_scalar(MIXRT_DTYPE_F16, {1}),
      four_d(MIXRT_DTYPE_F32, {1, 1, 2, 2});
  const MixrtPointwiseAttrs add{sizeof(MixrtPointwiseAttrs), nullptr,
                                MIXRT_BINARY_ADD, 0, 0};
  ExpectRefused(RunOnNoDevice(MIXRT_OP_BINARY, {&f32, &f16}, {&f32}, &add),
                "one non-bool dtype");
  ExpectRefused(RunOnNoDevice(MIXRT_OP_BINARY, {&f32, &other}, {&f32}, &add),
                "binary: an input's shape differs from the output's");
  ExpectRefused(RunOnNoDevice(MIXRT_OP_BINARY, {&f32}, {&f32}, &add),
                "binary takes 2-2 input(s)");
  const MixrtPointwiseAttrs bad_kind{sizeof(MixrtPointwiseAttrs), nullptr, 99,
                                     0, 0};
  EXPECT_EQ(
      RunOnNoDevice(MIXRT_OP_BINARY, {&f32, &f32}, {&f32}, &bad_kind).code(),
      absl::StatusCode::kUnimplemented);
  const MixrtReduceAttrs sum{sizeof(MixrtReduceAttrs), nullptr,
                             MIXRT_REDUCE_SUM, 2u, 0};
  ExpectRefused(RunOnNoDevice(MIXRT_OP_REDUCE, {&f32}, {&f32}, &sum),
                "reduce: output dim 1 is 3, expected 1");
  const MixrtAxisAttrs axis{sizeof(MixrtAxisAttrs), nullptr, 2};
  ExpectRefused(RunOnNoDevice(MIXRT_OP_SOFTMAX, {&f32}, {&f32}, &axis),
                "softmax axis 2 is outside [0, 2)");
  const MixrtNormAttrs norm{sizeof(MixrtNormAttrs), nullptr, 1e-5};
  ExpectRefused(RunOnNoDevice(MIXRT_OP_LAYER_NORM, {&f32, &vec},
                              {&f32, &vec, &vec}, &norm),
                "optionally both weight and bias");
  const MixrtCrossEntropyAttrs ce{sizeof(MixrtCrossEntropyAttrs), nullptr, -100,
                                  0, 0};
  ExpectRefused(
      RunOnNoDevice(MIXRT_OP_CROSS_ENTROPY, {&f32, &i32}, {&vec}, &ce),
      "i64 targets");
  const MixrtScalarAttrs none{sizeof(MixrtScalarAttrs), nullptr, 0};
  ExpectRefused(RunOnNoDevice(MIXRT_OP_NON_FINITE_CHECK_AND_UNSCALE,
                              {&f16_scalar}, {&scalar, &f32}, &none),
                "inv_scale must be a one-element f32 tensor");
  ExpectRefused(
      RunOnNoDevice(MIXRT_OP_EMBEDDING, {&f32, &i32}, {&f32}, nullptr),
      "i64 indices");
  const MixrtConvAttrs conv{
      sizeof(MixrtConvAttrs), nullptr, {1, 1}, {0, 0}, {1, 1}, 1, 0};
  ExpectRefused(RunOnNoDevice(MIXRT_OP_CONV2D, {&f32, &f32}, {&f32}, &conv),
                "4-d NCHW");
  const MixrtPoolAttrs pool{
      sizeof(MixrtPoolAttrs), nullptr, MIXRT_POOL_MAX, {0, 1}, {1, 1}, {0, 0}};
  ExpectRefused(RunOnNoDevice(MIXRT_OP_POOL2D, {&four_d}, {&four_d}, &pool),
                "kernel and stride must be >= 1");
  const MixrtBatchNormAttrs bn{sizeof(MixrtBatchNormAttrs), nullptr, 1, 0.1,
                               1e-5};
  const HostTensor one(MIXRT_DTYPE_F32, {1, 2, 1, 1}), c2(MIXRT_DTYPE_F32, {2});
  ExpectRefused(RunOnNoDevice(MIXRT_OP_BATCH_NORM, {&one, &c2, &c2},
                              {&one, &c2, &c2, &c2, &c2}, &bn),
                "more than one value per channel");
  // (An op number outside the ABI never gets here: the SDK refuses it.)
  // Attributes missing or too small.
  ExpectRefused(RunOnNoDevice(MIXRT_OP_FILL, {}, {&f32}, nullptr),
                "attributes missing");
  (void)i64;
}

TEST(GpuOpsValidation, MatmulOperandsAreChecked) {
  const HostTensor a(MIXRT_DTYPE_BF16, {2, 3}), b(MIXRT_DTYPE_BF16, {4, 5}),
      b_ok(MIXRT_DTYPE_BF16, {3, 5}), out(MIXRT_DTYPE_BF16, {2, 5}),
      out_f16(MIXRT_DTYPE_F16, {2, 5}), bias(MIXRT_DTYPE_BF16, {4});
  const HostTensor transposed =
      HostTensor(MIXRT_DTYPE_BF16, {5, 3}).Strided({3, 5}, {1, 3});
  const MixrtMatmulAttrs attrs{sizeof(MixrtMatmulAttrs), nullptr, 0, 0.0f};
  auto parse = [&](std::vector<const HostTensor*> in, const HostTensor* o) {
    Call c(MIXRT_OP_MATMUL, in, {o}, &attrs);
    return gpu::ParseMatmulCall(c.call).status();
  };
  ExpectRefused(parse({&a, &b}, &out), "matmul shapes do not chain");
  ExpectRefused(parse({&a, &b_ok}, &out_f16), "that dtype or f32");
  ExpectRefused(parse({&a, &b_ok, &bias}, &out), "bias must be floating [5]");
  ExpectRefused(parse({&a, &transposed}, &out), "must be contiguous");
  EXPECT_TRUE(parse({&a, &b_ok}, &out).ok());
  // A plugin that reads op T takes transposed operands, and only those: a
  // strided view that is no transpose of a dense buffer is still refused.
  {
    Call c(MIXRT_OP_MATMUL, {&a, &transposed}, {&out}, &attrs);
    auto m = gpu::ParseMatmulCall(c.call, /*allow_transposed=*/true);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_TRUE(m->b_transposed);
    EXPECT_FALSE(m->a_transposed);
    const HostTensor a_t =
        HostTensor(MIXRT_DTYPE_BF16, {3, 2}).Strided({2, 3}, {1, 2});
    Call c2(MIXRT_OP_MATMUL, {&a_t, &b_ok}, {&out}, &attrs);
    m = gpu::ParseMatmulCall(c2.call, /*allow_transposed=*/true);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_TRUE(m->a_transposed);
    const HostTensor every_other =
        HostTensor(MIXRT_DTYPE_BF16, {3, 10}).Strided({3, 5}, {10, 2});
    Call c3(MIXRT_OP_MATMUL, {&a, &every_other}, {&out}, &attrs);
    ExpectRefused(
        gpu::ParseMatmulCall(c3.call, /*allow_transposed=*/true).status(),
        "must be contiguous");
  }
  // An empty inner dim: the host's views keep strides that are not dense
  // row-major ([5, 0] with strides (1, 5)), yet they address nothing, so the
  // call is accepted (the product is zero, only the epilogue is left).
  const HostTensor empty_a =
      HostTensor(MIXRT_DTYPE_BF16, {0}).Strided({5, 0}, {1, 5});
  const HostTensor empty_b(MIXRT_DTYPE_BF16, {0, 3});
  const HostTensor out53(MIXRT_DTYPE_BF16, {5, 3});
  EXPECT_TRUE(parse({&empty_a, &empty_b}, &out53).ok());
}

TEST(GpuOpsValidation, LaunchWithoutADriverIsAnErrorNamingTheKernel) {
  HostTensor f32(MIXRT_DTYPE_F32, {4, 8});
  const MixrtScalarAttrs one{sizeof(MixrtScalarAttrs), nullptr, 1.0};
  const absl::Status fill = RunOnNoDevice(MIXRT_OP_FILL, {}, {&f32}, &one);
  ASSERT_FALSE(fill.ok());
  EXPECT_NE(std::string(fill.message()).find("fill: cudaError"),
            std::string::npos)
      << fill;
  // The host buffer was never written: the launch did not happen.
  EXPECT_EQ(f32.Get(0), 0.0);
  const MixrtAxisAttrs axis{sizeof(MixrtAxisAttrs), nullptr, 1};
  const absl::Status softmax =
      RunOnNoDevice(MIXRT_OP_SOFTMAX, {&f32}, {&f32}, &axis);
  EXPECT_NE(std::string(softmax.message()).find("softmax: cudaError"),
            std::string::npos)
      << softmax;
}

}  // namespace
}  // namespace mixrt::testing
