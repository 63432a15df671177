// conv2d and its two backwards on oneDNN. Each takes a call whose
// tensors the plugin has already validated against the ABI.
#ifndef MIXRT_BACKENDS_CPU_KERNELS_CPU_CONV_H_
#define MIXRT_BACKENDS_CPU_KERNELS_CPU_CONV_H_

#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "backends/cpu/kernels/epilogue.h"
#include "mixrt/plugin_api.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "plugins/sdk/plugin.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

absl::Status RunConv2d(const sdk::KernelCall& call);  // strided ok
absl::Status RunConv2dBackwardData(const sdk::KernelCall& call);
absl::Status RunConv2dBackwardWeights(const sdk::KernelCall& call);

// y = steps(x (*) w + bias) on oneDNN (cpu_conv.cc); x, w (and y unless it
// is f32) of one dtype oneDNN convolves. A binary step's operand is per
// channel ([N, C, H, W] with strides (0, 1, 0, 0)) or one element. With
// `packed_w` (PackConvWeights' result), w's data is not read;
// FAILED_PRECONDITION when the convolution now wants another layout.
absl::Status RunConvWithEpilogue(const sdk::TensorRef& x,
                                 const sdk::TensorRef& w,
                                 const sdk::TensorRef* bias,
                                 const sdk::TensorRef& y,
                                 const MixrtConvAttrs& attrs,
                                 absl::Span<const EpilogueStep> steps,
                                 const dnnl::memory* packed_w = nullptr);
// y = max_pool(steps(x (*) w + bias)), the convolution's result (conv_out
// describes it; no memory) kept in oneDNN's blocked layout in `between`
// (made or remade to fit) for oneDNN's max pooling, which drops NaN: only
// for results known finite.
absl::Status RunConvMaxPoolWithEpilogue(
    const sdk::TensorRef& x, const sdk::TensorRef& w,
    const sdk::TensorRef* bias, const sdk::TensorRef& conv_out,
    const sdk::TensorRef& y, const MixrtConvAttrs& attrs,
    absl::Span<const EpilogueStep> steps, const MixrtPoolAttrs& pool,
    dnnl::memory* between, const dnnl::memory* packed_w = nullptr);
// Its implementations ("" when either is none or a reference loop).
std::string ConvMaxPoolImplementation(
    const sdk::TensorRef& x, const sdk::TensorRef& w,
    const sdk::TensorRef* bias, const sdk::TensorRef& conv_out,
    const sdk::TensorRef& y, const MixrtConvAttrs& attrs,
    absl::Span<const EpilogueStep> steps, const MixrtPoolAttrs& pool);
// The oneDNN implementation that convolution gets ("" when none).
std::string ConvWithEpilogueImplementation(
    const sdk::TensorRef& x, const sdk::TensorRef& w,
    const sdk::TensorRef* bias, const sdk::TensorRef& y,
    const MixrtConvAttrs& attrs, absl::Span<const EpilogueStep> steps);
// w in the layout that convolution prefers, into `packed` (made or remade
// to fit).
absl::Status PackConvWeights(const sdk::TensorRef& x, const sdk::TensorRef& w,
                             const sdk::TensorRef* bias,
                             const sdk::TensorRef& y,
                             const MixrtConvAttrs& attrs,
                             absl::Span<const EpilogueStep> steps,
                             dnnl::memory* packed);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_CPU_CONV_H_
