// Activation epilogues applied after oneDNN's matmul and convolution. They
// are not oneDNN post-ops: oneDNN 2.6.3's relu post-op maps NaN to 0, which
// would hide an overflow from the grad scaler (conformance cases
// matmul/special_relu and conv2d/special_relu).
#ifndef MIXRT_BACKENDS_CPU_EPILOGUE_H_
#define MIXRT_BACKENDS_CPU_EPILOGUE_H_

#include "mixrt/plugin_api.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

float Activate(MixrtActivation act, float v);

// t = act(t) over a dense tensor of any float dtype, in parallel.
void ActivateInPlace(const sdk::TensorRef& t, MixrtActivation act);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_EPILOGUE_H_
