// pool2d forward and backward: parallel loops over the N * C planes of
// dense NCHW tensors, in f32. Not oneDNN's pooling: 2.6.3's max pooling
// drops NaN (the max of {1, NaN, 3, 2} comes out 3), where the ABI, like
// PyTorch, propagates it.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/float_rows.h"
#include "backends/cpu/parallel.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {

absl::Status RunPool(const sdk::KernelCall& call) {
  const bool backward = call.op == MIXRT_OP_POOL2D_BACKWARD;
  if (call.inputs.size() != (backward ? 2u : 1u) || call.outputs.size() != 1) {
    return absl::InvalidArgumentError("pool2d: wrong number of tensors");
  }
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtPoolAttrs>());
  const MixrtPoolAttrs a = *attrs;
  const sdk::TensorRef& x = call.inputs[backward ? 1 : 0];
  const sdk::TensorRef& y = backward ? call.inputs[0] : call.outputs[0];
  if (x.ndim() != 4 || y.ndim() != 4) {
    return absl::InvalidArgumentError("pool2d takes 4-d NCHW tensors");
  }
  const int64_t h = x.dim(2), w = x.dim(3), ho = y.dim(2), wo = y.dim(3);
  const int64_t planes = x.dim(0) * x.dim(1);
  const bool max = a.kind == MIXRT_POOL_MAX;
  const float divisor = static_cast<float>(a.kernel[0] * a.kernel[1]);
  const sdk::TensorRef& out = call.outputs[0];
  ParallelFor(planes, GrainFor(h * w), [&](int64_t begin, int64_t end) {
    std::vector<float> in(h * w), go(ho * wo),
        result(backward ? h * w : ho * wo);
    for (int64_t p = begin; p < end; ++p) {
      LoadRow(x.data(), x.dtype(), p * h * w, h * w, in.data());
      if (backward) {
        LoadRow(y.data(), y.dtype(), p * ho * wo, ho * wo, go.data());
        std::fill(result.begin(), result.end(), 0.0f);
      }
      for (int64_t oy = 0; oy < ho; ++oy) {
        for (int64_t ox = 0; ox < wo; ++ox) {
          float best = -INFINITY, sum = 0;
          int64_t best_at = -1;
          for (int64_t i = 0; i < a.kernel[0]; ++i) {
            const int64_t r = oy * a.stride[0] - a.padding[0] + i;
            if (r < 0 || r >= h) continue;
            for (int64_t j = 0; j < a.kernel[1]; ++j) {
              const int64_t c = ox * a.stride[1] - a.padding[1] + j;
              if (c < 0 || c >= w) continue;
              const float v = in[r * w + c];
              sum += v;
              if (best_at < 0 || v > best ||
                  (std::isnan(v) && !std::isnan(best))) {
                best = v;
                best_at = r * w + c;
              }
            }
          }
          if (!backward) {
            result[oy * wo + ox] = max ? best : sum / divisor;
            continue;
          }
          const float g = go[oy * wo + ox];
          if (max) {
            if (best_at >= 0) result[best_at] += g;
            continue;
          }
          for (int64_t i = 0; i < a.kernel[0]; ++i) {
            const int64_t r = oy * a.stride[0] - a.padding[0] + i;
            if (r < 0 || r >= h) continue;
            for (int64_t j = 0; j < a.kernel[1]; ++j) {
              const int64_t c = ox * a.stride[1] - a.padding[1] + j;
              if (c >= 0 && c < w) result[r * w + c] += g / divisor;
            }
          }
        }
      }
      const int64_t n = backward ? h * w : ho * wo;
      StoreRow(result.data(), n, out.data(), out.dtype(), p * n);
    }
  });
  return absl::OkStatus();
}

}  // namespace mixrt::cpu
