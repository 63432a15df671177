// Convolution epilogue fusion (ABI 1.1) on the CPU plugin: a conv2d and the
// chain only it feeds (an eval batch_norm's per-channel scale and shift,
// other per-channel or scalar add/sub/mul, activations, casts to f32 or the
// operands' dtype) run as one oneDNN convolution whose post-ops apply the
// chain while each output block is in registers, with the weights packed
// into oneDNN's layout once per weight version.
//
// A relu ending the chain is a post-op only where it cannot hide a NaN:
// oneDNN 2.6.3's relu post-op maps NaN to 0, which would hide an overflow
// from the grad scaler. Each run bounds the value before the relu from the
// operands' largest magnitudes, max|x| * max|w| * (C/groups * kh * kw) +
// max|bias|, carried through the chain's scales and shifts: below FLT_MAX
// (with room for rounding) no NaN can arise and the post-op relu is exact;
// otherwise (a NaN or inf operand, or a possible overflow) the chain runs
// without it and the op-by-op relu, which keeps NaN, follows.
#ifndef MIXRT_BACKENDS_CPU_FUSED_CONV_H_
#define MIXRT_BACKENDS_CPU_FUSED_CONV_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/cpu/epilogue_chain.h"
#include "mixrt/plugin_api.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "plugins/sdk/fusion.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

// y = steps(x (*) w + bias) on oneDNN (cpu_conv.cc); x, w (and y unless it
// is f32) of one dtype oneDNN convolves. A binary step's operand is per
// channel ([N, C, H, W] with strides (0, 1, 0, 0)) or one element. With
// `packed_w` (PackConvWeights' result), w's data is not read;
// FAILED_PRECONDITION when the convolution now wants another layout.
absl::Status RunConvWithEpilogue(const sdk::TensorRef& x, const sdk::TensorRef& w,
                                 const sdk::TensorRef* bias, const sdk::TensorRef& y,
                                 const MixrtConvAttrs& attrs,
                                 absl::Span<const EpilogueStep> steps,
                                 const dnnl::memory* packed_w = nullptr);
// y = max_pool(steps(x (*) w + bias)), the convolution's result (conv_out
// describes it; no memory) kept in oneDNN's blocked layout in `between`
// (made or remade to fit) for oneDNN's max pooling, which drops NaN: only
// for results known finite.
absl::Status RunConvMaxPoolWithEpilogue(const sdk::TensorRef& x, const sdk::TensorRef& w,
                                        const sdk::TensorRef* bias,
                                        const sdk::TensorRef& conv_out, const sdk::TensorRef& y,
                                        const MixrtConvAttrs& attrs,
                                        absl::Span<const EpilogueStep> steps,
                                        const MixrtPoolAttrs& pool, dnnl::memory* between,
                                        const dnnl::memory* packed_w = nullptr);
// Its implementations ("" when either is none or a reference loop).
std::string ConvMaxPoolImplementation(const sdk::TensorRef& x, const sdk::TensorRef& w,
                                      const sdk::TensorRef* bias,
                                      const sdk::TensorRef& conv_out, const sdk::TensorRef& y,
                                      const MixrtConvAttrs& attrs,
                                      absl::Span<const EpilogueStep> steps,
                                      const MixrtPoolAttrs& pool);
// The oneDNN implementation that convolution gets ("" when none).
std::string ConvWithEpilogueImplementation(const sdk::TensorRef& x, const sdk::TensorRef& w,
                                           const sdk::TensorRef* bias,
                                           const sdk::TensorRef& y,
                                           const MixrtConvAttrs& attrs,
                                           absl::Span<const EpilogueStep> steps);
// w in the layout that convolution prefers, into `packed` (made or remade
// to fit).
absl::Status PackConvWeights(const sdk::TensorRef& x, const sdk::TensorRef& w,
                             const sdk::TensorRef* bias, const sdk::TensorRef& y,
                             const MixrtConvAttrs& attrs, absl::Span<const EpilogueStep> steps,
                             dnnl::memory* packed);

// Per node, its group (`first`, first + 1, ...) or -1: each group a conv2d
// and the chain it feeds; nodes `taken` by another fusion are left out.
std::vector<int> ClaimConvEpilogues(const sdk::FusionGraph& graph, absl::Span<const int> taken,
                                    int first);

absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileFusedConv(
    const sdk::FusionGraph& graph, absl::Span<const int> group_of_node, int group);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_FUSED_CONV_H_
