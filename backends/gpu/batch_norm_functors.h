// Batch normalization over all dims but 1, in the row protocol of
// row_functors.h with one "row" per channel: lanes stride over the channel's
// N * spatial elements.
#ifndef MIXRT_BACKENDS_GPU_BATCH_NORM_FUNCTORS_H_
#define MIXRT_BACKENDS_GPU_BATCH_NORM_FUNCTORS_H_

#include <cmath>
#include <cstdint>

#include "backends/gpu/row_functors.h"

namespace mixrt::gpu {

// Element j of channel c in x [N, C, S...] (row-major, S = spatial size).
struct ChannelElements {
  int64_t channels = 1;
  int64_t spatial = 1;
  int64_t count = 0;  // N * spatial
  MIXRT_HOST_DEVICE int64_t Linear(int64_t c, int64_t j) const {
    return ((j / spatial) * channels + c) * spatial + j % spatial;
  }
};

MIXRT_HOST_DEVICE inline float LoadAt(const DeviceTensor& t, int64_t i) {
  return t.LoadFloat(t.Offset(i));
}

// Training: batch statistics (Welford), running stats updated with the
// unbiased variance; eval: running statistics. save_mean / save_invstd are
// the statistics used.
struct BatchNormChannels {
  static constexpr int kPasses = 1;
  DeviceTensor y;
  DeviceTensor save_mean;
  DeviceTensor save_invstd;
  DeviceTensor running_mean;
  DeviceTensor running_var;
  DeviceTensor x;
  DeviceTensor weight;
  DeviceTensor bias;
  ChannelElements elements;
  float momentum;
  float eps;
  bool training;

  MIXRT_HOST_DEVICE RowAcc Identity(int) const { return MakeAcc(0.0f); }
  MIXRT_HOST_DEVICE RowAcc Partial(int, int64_t c, int lane, int lanes,
                                   const RowAcc*) const {
    RowAcc r = Identity(0);
    if (!training) return r;
    for (int64_t j = lane; j < elements.count; j += lanes) {
      r = WelfordAdd(r, LoadAt(x, elements.Linear(c, j)));
    }
    return r;
  }
  MIXRT_HOST_DEVICE RowAcc Combine(int, const RowAcc& a,
                                   const RowAcc& b) const {
    return WelfordCombine(a, b);
  }
  MIXRT_HOST_DEVICE void Write(int64_t c, int lane, int lanes,
                               const RowAcc* acc) const {
    const float n = static_cast<float>(elements.count);
    float mean, var;
    if (training) {
      mean = acc[0].v[1];
      var = acc[0].v[2] / n;
    } else {
      mean = LoadAt(running_mean, c);
      var = LoadAt(running_var, c);
    }
    const float invstd = 1.0f / sqrtf(var + eps);
    if (lane == 0) {
      save_mean.StoreFloat(save_mean.Offset(c), mean);
      save_invstd.StoreFloat(save_invstd.Offset(c), invstd);
      if (training) {
        const int64_t rm = running_mean.Offset(c);
        const int64_t rv = running_var.Offset(c);
        running_mean.StoreFloat(
            rm, (1 - momentum) * running_mean.LoadFloat(rm) + momentum * mean);
        running_var.StoreFloat(rv, (1 - momentum) * running_var.LoadFloat(rv) +
                                       momentum * acc[0].v[2] / (n - 1));
      }
    }
    const float w = LoadAt(weight, c);
    const float b = LoadAt(bias, c);
    for (int64_t j = lane; j < elements.count; j += lanes) {
      const int64_t i = elements.Linear(c, j);
      y.StoreFloat(y.Offset(i), (LoadAt(x, i) - mean) * invstd * w + b);
    }
  }
};

// grad_x, grad_weight = sum(g xhat), grad_bias = sum(g) per channel.
struct BatchNormBackwardChannels {
  static constexpr int kPasses = 1;
  DeviceTensor grad_x;
  DeviceTensor grad_weight;
  DeviceTensor grad_bias;
  DeviceTensor grad_y;
  DeviceTensor x;
  DeviceTensor weight;
  DeviceTensor mean;
  DeviceTensor invstd;
  ChannelElements elements;
  bool training;

  MIXRT_HOST_DEVICE RowAcc Identity(int) const { return MakeAcc(0.0f); }
  MIXRT_HOST_DEVICE RowAcc Partial(int, int64_t c, int lane, int lanes,
                                   const RowAcc*) const {
    const float mu = LoadAt(mean, c);
    const float is = LoadAt(invstd, c);
    RowAcc r = Identity(0);
    for (int64_t j = lane; j < elements.count; j += lanes) {
      const int64_t i = elements.Linear(c, j);
      const float g = LoadAt(grad_y, i);
      r.v[0] += g;
      r.v[1] += g * (LoadAt(x, i) - mu) * is;
    }
    return r;
  }
  MIXRT_HOST_DEVICE RowAcc Combine(int, const RowAcc& a,
                                   const RowAcc& b) const {
    return MakeAcc(a.v[0] + b.v[0], a.v[1] + b.v[1]);
  }
  MIXRT_HOST_DEVICE void Write(int64_t c, int lane, int lanes,
                               const RowAcc* acc) const {
    const float n = static_cast<float>(elements.count);
    const float sum_g = acc[0].v[0];
    const float sum_gxhat = acc[0].v[1];
    if (lane == 0) {
      grad_weight.StoreFloat(grad_weight.Offset(c), sum_gxhat);
      grad_bias.StoreFloat(grad_bias.Offset(c), sum_g);
    }
    const float mu = LoadAt(mean, c);
    const float is = LoadAt(invstd, c);
    const float w = LoadAt(weight, c);
    for (int64_t j = lane; j < elements.count; j += lanes) {
      const int64_t i = elements.Linear(c, j);
      const float g = LoadAt(grad_y, i);
      float v = g * w * is;
      if (training) {
        const float xhat = (LoadAt(x, i) - mu) * is;
        v = w * is * (g - sum_g / n - xhat * sum_gxhat / n);
      }
      grad_x.StoreFloat(grad_x.Offset(i), v);
    }
  }
};

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_BATCH_NORM_FUNCTORS_H_
