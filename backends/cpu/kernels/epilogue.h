// What oneDNN's matmul and convolution apply after the product: post-op
// steps (EpilogueStep, built from fused chains by fusion/epilogue_chain.h),
// and activation epilogues. The activations are not oneDNN post-ops:
// oneDNN 2.6.3's relu post-op maps NaN to 0, which would hide an overflow from
// the grad scaler (conformance cases matmul/special_relu and
// conv2d/special_relu).
#ifndef MIXRT_BACKENDS_CPU_KERNELS_EPILOGUE_H_
#define MIXRT_BACKENDS_CPU_KERNELS_EPILOGUE_H_

#include "mixrt/plugin_api.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

// One post-op as a primitive takes it: eltwise when `operand` is null,
// else binary with it (the layouts each fusion allows: a matmul's c
// layout, row broadcast or one element; a conv's per channel or one
// element).
struct EpilogueStep {
  dnnl::algorithm algorithm = dnnl::algorithm::undef;
  float alpha = 0, beta = 0;
  const sdk::TensorRef* operand = nullptr;
};

float Activate(MixrtActivation act, float v);

// t = act(t) over a dense tensor of any float dtype, in parallel.
void ActivateInPlace(const sdk::TensorRef& t, MixrtActivation act);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_KERNELS_EPILOGUE_H_
