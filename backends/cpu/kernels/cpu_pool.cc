// pool2d forward and backward: parallel loops over the N * C planes of
// dense NCHW tensors, in f32 (a branch-free path for windows inside the
// plane: the generic loop's bounds and NaN checks made a CNN's 2x2 max
// pool ~30x slower than its memory traffic). Not oneDNN's pooling: 2.6.3's max
// pooling drops NaN (the max of {1, NaN, 3, 2} comes out 3), where the ABI,
// like PyTorch, propagates it.
#include "backends/cpu/kernels/cpu_pool.h"

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/kernels/float_rows.h"
#include "backends/cpu/kernels/parallel.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::cpu {
namespace {

// The larger of x and y, NaN when either is (the order of the scan does
// not matter then: any NaN wins).
inline float MaxKeepingNaN(float x, float y) {
  return (x != x || x > y) ? x : y;
}

// Forward pooling of one plane whose windows all lie inside it (no
// padding): rows of the output at a time, branch-free, so the compiler
// vectorizes the 2x2/stride-2 case (a CNN's usual pool) across columns.
void PoolPlaneInside(const float* in, int64_t w, int64_t ho, int64_t wo,
                     const MixrtPoolAttrs& a, bool max, float* out) {
  const int64_t kh = a.kernel[0], kw = a.kernel[1], sh = a.stride[0],
                sw = a.stride[1];
  if (kh == 2 && kw == 2 && sh == 2 && sw == 2) {
    for (int64_t oy = 0; oy < ho; ++oy) {
      const float* r0 = in + 2 * oy * w;
      const float* r1 = r0 + w;
      float* o = out + oy * wo;
      if (max) {
        for (int64_t ox = 0; ox < wo; ++ox) {
          o[ox] = MaxKeepingNaN(MaxKeepingNaN(r0[2 * ox], r0[2 * ox + 1]),
                                MaxKeepingNaN(r1[2 * ox], r1[2 * ox + 1]));
        }
      } else {
        for (int64_t ox = 0; ox < wo; ++ox) {
          // The generic loop's order: ((0 + a) + b) + c) + d.
          o[ox] = (((0.0f + r0[2 * ox]) + r0[2 * ox + 1]) + r1[2 * ox]) +
                  r1[2 * ox + 1];
          o[ox] /= 4.0f;
        }
      }
    }
    return;
  }
  for (int64_t oy = 0; oy < ho; ++oy) {
    for (int64_t ox = 0; ox < wo; ++ox) {
      const float* window = in + oy * sh * w + ox * sw;
      float best = window[0], sum = 0.0f;
      for (int64_t i = 0; i < kh; ++i) {
        for (int64_t j = 0; j < kw; ++j) {
          const float v = window[i * w + j];
          best = MaxKeepingNaN(best, v);
          sum += v;
        }
      }
      out[oy * wo + ox] = max ? best : sum / static_cast<float>(kh * kw);
    }
  }
}

}  // namespace

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
  const bool inside = !backward && a.padding[0] == 0 && a.padding[1] == 0 &&
                      (ho - 1) * a.stride[0] + a.kernel[0] <= h &&
                      (wo - 1) * a.stride[1] + a.kernel[1] <= w && ho > 0 &&
                      wo > 0;
  if (inside) {
    ParallelFor(planes, GrainFor(h * w), [&](int64_t begin, int64_t end) {
      std::vector<float> in(h * w), result(ho * wo);
      for (int64_t p = begin; p < end; ++p) {
        LoadRow(x.data(), x.dtype(), p * h * w, h * w, in.data());
        PoolPlaneInside(in.data(), w, ho, wo, a, max, result.data());
        StoreRow(result.data(), ho * wo, out.data(), out.dtype(), p * ho * wo);
      }
    });
    return absl::OkStatus();
  }
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
